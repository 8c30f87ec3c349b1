#!/usr/bin/env bash
# tests/cli/safety/nonfinite_end_test.sh MOE4D — a run whose last steps are non-finite (a streak
# shorter than train.max_nonfinite_steps) exits non-zero with one error line, instead of 0 with a
# warning and no final checkpoint (issue 30, found by fuzzing weight_decay).
source "$(dirname "$0")/common.sh" "$1"

make_corpus corpus bytes
write_config run.yaml corpus bytes run 4 0
rc=0
"$MOE4D" train run.yaml --set train.lr=1e30 --set train.weight_decay=0 --set train.warmup_steps=0 \
  --set train.max_nonfinite_steps=10 --quiet > run.log 2>&1 || rc=$?
[ $rc -eq 2 ] || { cat run.log; die "a run that ended non-finite exited $rc, expected 2"; }
[ "$(grep -c '^moe4d: error' run.log)" -eq 1 ] || { cat run.log; die "expected one error line"; }
grep -Eq "^moe4d: error: training ended after step 4 with the loss or the gradients non-finite for the last [0-9]+ step" run.log ||
  { cat run.log; die "the error line does not say the run ended non-finite"; }
echo "ok: nonfinite_end_test"
