#!/usr/bin/env bash
# tests/cli/safety/metrics_disk_test.sh MOE4D — a metrics file that cannot be written stops the run
# with a checkpoint, never silently:
#  1. a full disk (/dev/full: every write fails with ENOSPC): one error line naming the file and the
#     reason, a checkpoint of the step, exit 2;
#  2. a partial last line (a kill mid-write) is cut off on --resume, and the run finishes with its
#     report; 3. a read-only checkpoint.dir is reported as not writable.
source "$(dirname "$0")/common.sh" "$1"

make_corpus corpus bytes
write_config run.yaml corpus bytes run 300 0
# 1. A disk that is full: every write to /dev/full fails with ENOSPC. The run stops after the step
#    whose line could not be written, with a checkpoint of it, and one error line.
rc=0
"$MOE4D" train run.yaml --metrics /dev/full --exit-after 5 --quiet > full.log 2>&1 || rc=$?
[ $rc -ne 0 ] || { cat full.log; die "a run whose metrics could not be written exited 0"; }
[ $rc -lt 128 ] || { cat full.log; die "the run died of a signal ($rc)"; }
[ "$(grep -c '^moe4d: error' full.log)" -eq 1 ] || { cat full.log; die "expected exactly one error line"; }
grep -q "^moe4d: error: cannot write metrics file /dev/full: No space left on device; training stopped after step 1; checkpoint written: run/step_00000001 (continue with --resume)" full.log ||
  { cat full.log; die "the error does not name the metrics file, the reason and the checkpoint"; }
"$MOE4D" ckpt verify run/step_00000001 > /dev/null || die "the stop checkpoint does not verify"
# (The same stop with the file size limit hitting the metrics file mid-line is a unit test:
#  tests/train/metrics_writer_test.cc, MetricsWriterTest.FileSizeLimitKeepsWholeLines.)
"$MOE4D" train run.yaml --resume --exit-after 3 --quiet > more.log 2>&1 || { cat more.log; die "resume failed"; }

# 2. A half-written line at the end: --resume cuts it off and finishes; the report is drawn.
printf '{"step": 99999, "loss": 1.2' >> run/metrics.jsonl
"$MOE4D" train run.yaml --resume > resume.log 2>&1 || { cat resume.log; die "resume after a partial line failed"; }
grep -q '"step": 99999' run/metrics.jsonl && die "the partial line was kept"
[ "$(wc -l < run/metrics.jsonl)" -eq 299 ] || die "expected 299 lines after resume (step 1's line went to /dev/full)"
[ -f run/loss.svg ] || { cat resume.log; die "the end-of-run report was not drawn"; }

# 3. A checkpoint.dir this user cannot write: "not writable", not "No such file or directory".
#    As root (who may write anywhere) the runs are made as uid 65534 (nobody), with a copy of the
#    binary in the scratch folder: the build may live where nobody cannot reach (a checkout under
#    /root, mode 700). The binary needs only system libraries (its RUNPATH names /usr/lib ones).
mkdir ro && chmod 555 ro
write_config ro.yaml corpus bytes ro/run 2 0
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  cp "$MOE4D" "$WORK/moe4d"
  MOE4D=$WORK/moe4d
fi
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
