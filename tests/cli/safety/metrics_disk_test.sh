#!/usr/bin/env bash
# tests/cli/safety/metrics_disk_test.sh MOE4D — a metrics file that cannot be written stops the run
# with a checkpoint, never silently:
#  1. the file size limit (RLIMIT_FSIZE, SIGXFSZ ignored: writes fail with EFBIG, as a full disk
#     fails them with ENOSPC) is hit by metrics.jsonl mid-run: one error line naming the file, a
#     checkpoint of the last step, only whole lines in the file;
#  2. a partial last line (a kill mid-write) is cut off on --resume, and the run finishes with its
#     report; 3. a read-only checkpoint.dir is reported as not writable.
source "$(dirname "$0")/common.sh" "$1"

make_corpus corpus bytes
write_config run.yaml corpus bytes run 300 0
# Checkpoint files stay far below the limit; metrics.jsonl (~0.8 KiB a line) crosses it mid-run.
limit_kib=96
rc=0
(trap '' XFSZ; ulimit -f $limit_kib; exec "$MOE4D" train run.yaml --quiet) > full.log 2>&1 || rc=$?
[ $rc -ne 0 ] || { cat full.log; die "a run whose metrics could not be written exited 0"; }
[ $rc -lt 128 ] || { cat full.log; die "the run died of a signal ($rc)"; }
[ "$(grep -c '^moe4d: error' full.log)" -eq 1 ] || { cat full.log; die "expected exactly one error line"; }
grep -q "^moe4d: error: cannot write metrics file run/metrics.jsonl: File too large; training stopped after step [0-9]*; checkpoint written: run/step_" full.log ||
  { cat full.log; die "the error does not name the metrics file, the reason and the checkpoint"; }
step=$(sed -nE 's/.*training stopped after step ([0-9]+);.*/\1/p' full.log)
[ "$step" -lt 300 ] || die "the limit was never hit"
ckpt=$(printf 'run/step_%08d' "$step")
"$MOE4D" ckpt verify "$ckpt" > /dev/null || die "the stop checkpoint $ckpt does not verify"
python3 - run/metrics.jsonl <<'PY' || die "metrics.jsonl holds a partial line"
import json, sys
data = open(sys.argv[1], 'rb').read()
assert data.endswith(b'\n'), 'no newline at the end'
for line in data.splitlines(): json.loads(line)
PY
lines=$(wc -l < run/metrics.jsonl)
[ "$lines" -eq $((step - 1)) ] || die "metrics has $lines lines; expected $((step - 1)) (step $step's line failed)"

# 2. A half-written line at the end: --resume cuts it off and finishes; the report is drawn.
printf '{"step": 99999, "loss": 1.2' >> run/metrics.jsonl
"$MOE4D" train run.yaml --resume > resume.log 2>&1 || { cat resume.log; die "resume after a partial line failed"; }
grep -q "99999" run/metrics.jsonl && die "the partial line was kept"
[ "$(wc -l < run/metrics.jsonl)" -eq 299 ] || die "expected 299 lines after resume (step $step's line was never written)"
[ -f run/loss.svg ] || { cat resume.log; die "the end-of-run report was not drawn"; }

# 3. A checkpoint.dir this user cannot write: "not writable", not "No such file or directory".
mkdir ro && chmod 555 ro
write_config ro.yaml corpus bytes ro/run 2 0
as_user=()
[ "$(id -u)" -eq 0 ] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
chmod 755 "$WORK" && chmod -R a+rX "$WORK"
if "${as_user[@]}" "$MOE4D" train ro.yaml --quiet > ro.log 2>&1; then cat ro.log; die "a read-only checkpoint.dir was accepted"; fi
grep -q "^moe4d: error: cannot create checkpoint.dir ro/run: Permission denied" ro.log ||
  { cat ro.log; die "the read-only dir is not reported clearly"; }
mkdir ro2 && chmod 555 ro2
write_config ro2.yaml corpus bytes ro2 2 0
if "${as_user[@]}" "$MOE4D" train ro2.yaml --quiet > ro2.log 2>&1; then cat ro2.log; die "a read-only checkpoint.dir was accepted"; fi
grep -q "^moe4d: error: checkpoint.dir ro2 is not writable: Permission denied" ro2.log ||
  { cat ro2.log; die "the read-only dir is not reported as not writable"; }
echo "ok: metrics_disk_test"
