#!/usr/bin/env bash
# expect_error.sh REGEX COMMAND...: passes iff COMMAND exits non-zero and prints exactly one line
# starting "moe4d: error" whose text matches REGEX (extended regex), and was not killed by a signal.
set -u
regex=$1
shift
output=$("$@" 2>&1)
code=$?
if [ "$code" -eq 0 ]; then
  echo "expected a non-zero exit, got 0; output:"; echo "$output"; exit 1
fi
if [ "$code" -ge 128 ]; then  # 128 + N: killed by signal N (an abort is 134)
  echo "expected a clean error exit, got $code (a signal); output:"; echo "$output"; exit 1
fi
errors=$(printf '%s\n' "$output" | grep -c '^moe4d: error')
if [ "$errors" -ne 1 ]; then
  echo "expected exactly one 'moe4d: error' line, got $errors; output:"; echo "$output"; exit 1
fi
if ! printf '%s\n' "$output" | grep '^moe4d: error' | grep -Eq -- "$regex"; then
  echo "error line does not match /$regex/; output:"; echo "$output"; exit 1
fi
echo "ok (exit $code): $(printf '%s\n' "$output" | grep '^moe4d: error')"
