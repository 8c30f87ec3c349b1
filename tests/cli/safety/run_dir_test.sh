#!/usr/bin/env bash
# tests/cli/safety/run_dir_test.sh MOE4D — a run directory is never silently overwritten or mixed:
#  1. a fresh run into a used checkpoint.dir is refused with one line, and no file in it changes;
#  2. --start-over moves the old run aside (nothing deleted) and starts fresh;
#  3. --exit-after leaves a checkpoint; checkpoint.interval 0 still checkpoints at the end;
#  4. --resume with `latest` deleted, then corrupt, falls back to the newest verifying step directory
#     (never step 0), and says why;
#  5. `ckpt verify` names the file with a flipped byte; `ckpt list` and `ckpt inspect` describe the run.
source "$(dirname "$0")/common.sh" "$1"

make_corpus corpus bytes
write_config run.yaml corpus bytes run 6 0

# 3. --exit-after 4 with interval 0: a checkpoint at step 4, the planned interruption.
"$MOE4D" train run.yaml --exit-after 4 --quiet > exit_after.log 2>&1 || { cat exit_after.log; die "exit-after run failed"; }
[ -f run/step_00000004/MANIFEST.json ] || { ls run; die "--exit-after 4 left no checkpoint step_00000004"; }
[ "$(cat run/latest)" = step_00000004 ] || die "latest is $(cat run/latest), expected step_00000004"

# 1. A fresh run into the used directory: refused, one line naming the dir and both ways on; nothing changes.
before=$(tree_sums run)
if "$MOE4D" train run.yaml --quiet > refused.log 2>&1; then cat refused.log; die "a fresh run into a used dir was accepted"; fi
[ "$(grep -c '^moe4d: error' refused.log)" -eq 1 ] || { cat refused.log; die "expected exactly one error line"; }
grep -q "^moe4d: error: checkpoint.dir run already holds a run (checkpoint step_00000004, latest, metrics.jsonl); pass --resume to continue it, or --start-over" refused.log ||
  { cat refused.log; die "the refusal does not name the dir, what it holds and the two ways on"; }
[ "$before" = "$(tree_sums run)" ] || die "the refused run changed files in run/"

# 4a. --resume continues to the end (interval 0: a checkpoint at the last step, 6).
"$MOE4D" train run.yaml --resume --quiet > resume.log 2>&1 || { cat resume.log; die "resume failed"; }
[ -f run/step_00000006/MANIFEST.json ] || die "the end of the run (interval 0) wrote no checkpoint"
[ "$(wc -l < run/metrics.jsonl)" -eq 6 ] || die "metrics.jsonl has $(wc -l < run/metrics.jsonl) lines, expected 6"

# 4b. `latest` deleted: --resume falls back to the newest verifying checkpoint (step 6), says so.
write_config run.yaml corpus bytes run 8 0
rm run/latest
"$MOE4D" train run.yaml --resume --exit-after 1 --quiet > fallback.log 2>&1 || { cat fallback.log; die "resume without latest failed"; }
grep -q "not using run/latest: run/latest is missing; resuming from run/step_00000006" fallback.log ||
  { cat fallback.log; die "the fallback does not name latest and the step it used"; }
grep -q "starting from step 0" fallback.log && die "resume without latest started from step 0"
[ -f run/step_00000007/MANIFEST.json ] || die "the resumed run did not continue from step 6"
[ "$(wc -l < run/metrics.jsonl)" -eq 7 ] || die "metrics.jsonl has $(wc -l < run/metrics.jsonl) lines, expected 7"

# 4c. `latest` names a corrupt checkpoint: the message names latest; step 6 is used.
printf 'xx' | dd of=run/step_00000007/model.safetensors bs=1 seek=100 conv=notrunc status=none
"$MOE4D" train run.yaml --resume --exit-after 1 --quiet > corrupt.log 2>&1 || { cat corrupt.log; die "resume past a corrupt latest failed"; }
grep -q "not using run/latest: checkpoint run/step_00000007 (named by run/latest) is corrupt: model.safetensors sha256 mismatch" corrupt.log ||
  { cat corrupt.log; die "the corrupt latest is not reported by name"; }
grep -q "resuming from run/step_00000006" corrupt.log || { cat corrupt.log; die "did not fall back to step 6"; }

# 5. ckpt verify names the file with a flipped byte (exit non-zero); ckpt list / inspect.
"$MOE4D" ckpt verify run/step_00000006 > verify_ok.log 2>&1 || { cat verify_ok.log; die "verify of a good checkpoint failed"; }
grep -q "ok    run/step_00000006/model.safetensors" verify_ok.log || { cat verify_ok.log; die "verify lists no file"; }
python3 - run/step_00000006/optimizer.safetensors <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x40; open(p, 'wb').write(b)
PY
if "$MOE4D" ckpt verify run/step_00000006 > verify_bad.log 2>&1; then cat verify_bad.log; die "verify passed a flipped byte"; fi
grep -q "^moe4d: error: checkpoint verification failed: run/step_00000006/optimizer.safetensors: sha256 mismatch" verify_bad.log ||
  { cat verify_bad.log; die "verify does not name the flipped file"; }
if "$MOE4D" ckpt verify run > verify_root.log 2>&1; then die "verify of the root passed"; fi
grep -q "FAIL  run/step_00000006/optimizer.safetensors" verify_root.log || { cat verify_root.log; die "root verify misses the file"; }
"$MOE4D" ckpt list run > list.log 2>&1 || { cat list.log; die "ckpt list failed"; }
head -2 list.log | tail -1 | grep -q "^step_00000007 .* 7 .*<- latest" || { cat list.log; die "list: newest first, marked latest"; }
"$MOE4D" ckpt inspect run > inspect.log 2>&1 || { cat inspect.log; die "ckpt inspect failed"; }
for want in "step        7" "layout      dp 1 x ep 1 x tp 1 x pp 1, zero_stage 0" "layers.1.moe.experts.w1" \
            "expert " "optimizer state: adamw (exp_avg for" "config:" "tokenizer   bytes"; do
  grep -qF "$want" inspect.log || { cat inspect.log; die "inspect lacks '$want'"; }
done

# 2. --start-over moves the old run aside, deletes nothing, and trains fresh from step 0.
old_sums=$(tree_sums run)
"$MOE4D" train run.yaml --start-over --exit-after 2 --quiet > over.log 2>&1 || { cat over.log; die "--start-over failed"; }
moved=$(ls -d run.old-* | head -1)
[ -n "$moved" ] || die "--start-over left no run.old-* directory"
[ "$old_sums" = "$(tree_sums "$moved")" ] || die "the moved-aside run differs from the old one"
[ "$(ls run | grep -c "^step_[0-9]")" -eq 1 ] || { ls run; die "the fresh run is not alone in run/"; }
[ -f run/step_00000002/MANIFEST.json ] || { ls -la run/step_00000002; cat over.log; die "the fresh run has no checkpoint at step 2"; }
[ "$(wc -l < run/metrics.jsonl)" -eq 2 ] || die "the fresh run's metrics have $(wc -l < run/metrics.jsonl) lines, expected 2"
echo "ok: run_dir_test"
