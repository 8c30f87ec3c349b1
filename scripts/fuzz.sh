#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS] [TARGET...]: builds the libFuzzer targets of tests/fuzz with clang++
# (ASan + UBSan, in build-fuzz/) and runs each for SECONDS (default 10) from a copy of its committed
# seed corpus. Prints one line per target with its executions; exits non-zero if any target found a
# crash, a hang (> 10 s for one input) or a sanitizer report (the reproducer is left in
# build-fuzz/findings/<target>/). Adding a target: drop tests/fuzz/fuzz_<name>.cc and
# tests/fuzz/corpus/fuzz_<name>/ (a few seed files); nothing else.
set -euo pipefail
seconds=${1:-10}
shift || true
root=$(cd "$(dirname "$0")/.." && pwd)
build=${MOE4D_FUZZ_BUILD:-$root/build-fuzz}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang)"; exit 1; }

mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DMOE4D_FUZZ=ON >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for source in "$root"/tests/fuzz/fuzz_*.cc; do targets+=("$(basename "$source" .cc)"); done
fi
cmake --build "$build" -j"${MOE4D_FUZZ_JOBS:-2}" --target "${targets[@]}"

failed=0
for target in "${targets[@]}"; do
  corpus=$build/corpus/$target findings=$build/findings/$target
  mkdir -p "$corpus" "$findings"
  cp -n "$root/tests/fuzz/corpus/$target/"* "$corpus/" 2>/dev/null || true
  log=$build/$target.log
  set +e
  (cd "$findings" && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -max_len=16384 "$corpus" >"$log" 2>&1)
  code=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  units=$(ls "$corpus" | wc -l)
  if [ "$code" -ne 0 ] || grep -q 'ERROR: \(AddressSanitizer\|libFuzzer\)\|runtime error:' "$log"; then
    echo "$target: FAILED after $execs executions (exit $code); see $log and $findings"
    grep -m3 'ERROR:\|runtime error:\|uncaught exception\|terminate called' "$log" || tail -5 "$log"
    failed=1
  else
    echo "$target: ok, $execs executions in ${seconds} s ($rate/s), corpus $units inputs, 0 crashes"
  fi
done
exit $failed
