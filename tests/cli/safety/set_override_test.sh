#!/usr/bin/env bash
# tests/cli/safety/set_override_test.sh MOE4D — `train CONFIG --set KEY=VALUE` trains with the
# override and records it in the checkpoint's config (state.json), where eval and resume read it.
source "$(dirname "$0")/common.sh" "$1"

make_corpus corpus bytes
write_config run.yaml corpus bytes run 50 0
"$MOE4D" train run.yaml --set train.steps=3 --set train.lr=2.5e-3 --set model.moe.top_k=1 --quiet > train.log 2>&1 ||
  { cat train.log; die "train with --set failed"; }
[ "$(wc -l < run/metrics.jsonl)" -eq 3 ] || die "--set train.steps=3 trained $(wc -l < run/metrics.jsonl) steps"
python3 - run/step_00000003/state.json <<'PY' || die "the checkpoint's config does not show the overrides"
import json, sys
config = json.load(open(sys.argv[1]))["config"]
for line in ("  steps: 3\n", "  lr: 0.0025\n", "    top_k: 1\n"):
    assert line in config, (line, config)
PY
# eval reads the checkpoint's config; --set overrides it the same way.
"$MOE4D" eval run --data corpus/valid.bin --set train.eval_batches=1 --json > eval.log 2>&1 || { cat eval.log; die "eval --set failed"; }
grep -q '"windows":4' eval.log || { cat eval.log; die "eval --set train.eval_batches=1 did not evaluate 1 batch of 4 windows"; }
rc=0
"$MOE4D" eval run --data corpus/valid.bin --set train.eval_batches=0 > bad_eval.log 2>&1 || rc=$?
[ $rc -eq 2 ] && grep -q "^moe4d: error: --set train.eval_batches: " bad_eval.log || { cat bad_eval.log; die "eval --set with a bad value"; }
echo "ok: set_override_test"
