#!/usr/bin/env bash
# scripts/test.sh — install and build what is missing, then run every test (unit, MPI, CLI).
#   scripts/test.sh [ctest args...]             the Release build in build/ (what CI runs)
#   scripts/test.sh --sanitize [ctest args...]  an ASan + UBSan build of everything in
#                                               build-sanitize/, the same suite under it; any
#                                               sanitizer report fails its test
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=0
if [ "${1:-}" = "--sanitize" ]; then sanitize=1; shift; fi
scripts/setup.sh
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
if [ $sanitize -eq 0 ]; then
  cd build
  exec ctest --output-on-failure -j 2 "$@"
fi

echo "== building the ASan + UBSan configuration (build-sanitize/)"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_C_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" > /dev/null
cmake --build build-sanitize -j "$(nproc)"
# Leak checking is off: OpenMPI, OpenBLAS and sentencepiece keep process-lifetime allocations that
# LeakSanitizer reports at exit. Every other ASan and UBSan report aborts the test that caused it.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd build-sanitize
exec ctest --output-on-failure -j 2 "$@"
