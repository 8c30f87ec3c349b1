#!/usr/bin/env bash
# huge_value.sh BASE KEY VALUE OUTDIR REGEX MOE4D ARGS...: writes BASE with the first `KEY:` line set
# to VALUE into OUTDIR and runs expect_error.sh REGEX MOE4D ARGS... on it; the config's path replaces
# an argument @CONFIG@, or is appended.
set -u
base=$1 key=$2 value=$3 out=$4 regex=$5
shift 5
mkdir -p "$out"
config=$out/${key}_${value}.yaml
awk -v key="$key" -v value="$value" '
  !done && $0 ~ "^ *" key ":" { sub(key ":.*", key ": " value); done = 1 } { print }
  END { if (!done) exit 3 }' "$base" >"$config" || { echo "no key $key in $base"; exit 1; }
args=() placed=0
for arg in "$@"; do
  if [ "$arg" = @CONFIG@ ]; then args+=("$config"); placed=1; else args+=("$arg"); fi
done
[ "$placed" -eq 1 ] || args+=("$config")
exec "$(dirname "$0")/expect_error.sh" "$regex" "${args[@]}"
