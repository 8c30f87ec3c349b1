#!/usr/bin/env bash
# expect_error.sh REGEX COMMAND...: passes iff COMMAND exits non-zero and prints exactly one line
# starting "moe4d: error" whose text matches REGEX (extended regex).
set -u
regex=$1
shift
output=$("$@" 2>&1)
code=$?
if [ "$code" -eq 0 ]; then
  echo "expected a non-zero exit, got 0; output:"; echo "$output"; exit 1
fi
errors=$(printf '%s\n' "$output" | grep -c '^moe4d: error')
if [ "$errors" -ne 1 ]; then
  echo "expected exactly one 'moe4d: error' line, got $errors; output:"; echo "$output"; exit 1
fi
if ! printf '%s\n' "$output" | grep '^moe4d: error' | grep -Eq -- "$regex"; then
  echo "error line does not match /$regex/; output:"; echo "$output"; exit 1
fi
echo "ok (exit $code): $(printf '%s\n' "$output" | grep '^moe4d: error')"
