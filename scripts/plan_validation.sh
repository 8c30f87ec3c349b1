#!/usr/bin/env bash
# scripts/plan_validation.sh — regenerate the planner's validation table (docs/planner.md §Validation)
# and the predictions tests/plan/validation_test.cc holds it to (tests/plan/data/validation_table.tsv).
#
# Run it after a planner change that moves a prediction, review the table's diff, commit both files.
# Usage: scripts/plan_validation.sh [BUILD_DIR]   (default: build; the plan_test target is built there)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
cmake --build "$build" --target plan_test -j 2 >/dev/null
MOE4D_PLAN_VALIDATION_WRITE=1 "$build/tests/plan/plan_test" --gtest_filter='Validation.*' --gtest_brief=1 |
  grep -v '^\[' || true
echo "wrote $root/tests/plan/data/validation_table.tsv and the table in $root/docs/planner.md"
