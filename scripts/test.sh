#!/usr/bin/env bash
# scripts/test.sh — install and build what is missing, then run every test (unit, MPI, CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
cd build
ctest --output-on-failure -j 2 "$@"
