#!/usr/bin/env bash
# tests/cli/safety/signal_stop_test.sh MOE4D MPIEXEC... — stopping loses no work:
#  1. under mpirun with 2 ranks, SIGTERM to ONE rank's process group mid-run makes both ranks stop
#     after the same step, write a checkpoint (checkpoint.interval is 0) and exit 0 naming it;
#     --resume from it reproduces the uninterrupted run's losses bit-exactly;
#  2. a second signal exits at once (the signal's default action), without waiting for the step.
# ASYNC=1: the interrupted run saves with checkpoint.format sharded and checkpoint.async, so its stop
# checkpoint is written in the background: the run must wait for it and commit it before exiting.
moe4d_bin=$1
shift
MPIEXEC=("$@")
source "$(dirname "$0")/common.sh" "$moe4d_bin"

make_corpus corpus bytes
STEPS=400  # long enough that the signal lands mid-run on a fast machine
write_config ref.yaml corpus bytes ref $STEPS 0 2
write_config run.yaml corpus bytes run $STEPS 0 2
if [ "${ASYNC:-0}" = 1 ]; then printf '  format: sharded\n  async: true\n' >> run.yaml; fi

"${MPIEXEC[@]}" -np 2 "$MOE4D" train ref.yaml --quiet > ref.log 2>&1 || { cat ref.log; die "the uninterrupted run failed"; }
[ "$(wc -l < ref/metrics.jsonl)" -eq $STEPS ] || die "the reference run has $(wc -l < ref/metrics.jsonl) metrics lines"

# The interrupted run: wait until it has trained a few steps, then signal rank 1's process group only.
"${MPIEXEC[@]}" -np 2 "$MOE4D" train run.yaml --quiet > run.log 2>&1 &
launcher=$!
for _ in $(seq 600); do
  [ -f run/metrics.jsonl ] && [ "$(wc -l < run/metrics.jsonl)" -ge 3 ] && break
  sleep 0.1
done
rank1=""
for pid in $(pgrep -f "$MOE4D train run.yaml" || true); do
  if tr '\0' '\n' < /proc/$pid/environ 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then rank1=$pid; fi
done
[ -n "$rank1" ] || { kill $launcher; cat run.log; die "rank 1 not found"; }
pgid=$(ps -o pgid= -p "$rank1" | tr -d ' ')
launcher_pgid=$(ps -o pgid= -p $$ | tr -d ' ')
if [ "$pgid" = "$launcher_pgid" ]; then
  kill -TERM "$rank1"  # the rank shares our group: signal the process alone, never ourselves
else
  kill -TERM -- "-$pgid"
fi
rc=0
wait $launcher || rc=$?
[ $rc -eq 0 ] || { cat run.log; die "the stopped run exited $rc, expected 0"; }
line=$(grep "stopped by SIGTERM after step" run.log) || { cat run.log; die "no line saying where the checkpoint is"; }
stop_step=$(echo "$line" | sed -E 's/.*after step ([0-9]+) of.*/\1/')
[ "$stop_step" -lt $STEPS ] || die "the signal arrived after the run ended (step $stop_step)"
ckpt=$(printf 'run/step_%08d' "$stop_step")
echo "$line" | grep -q "checkpoint $ckpt (continue with --resume)" || { cat run.log; die "the line does not name $ckpt"; }
[ -f "$ckpt/MANIFEST.json" ] || die "no checkpoint $ckpt"
[ "$(ls run | grep -c "^step_[0-9]")" -eq 1 ] || die "expected exactly the stop checkpoint in run/"
[ "$(wc -l < run/metrics.jsonl)" -eq "$stop_step" ] || die "metrics lines $(wc -l < run/metrics.jsonl) != stop step $stop_step"

"${MPIEXEC[@]}" -np 2 "$MOE4D" train run.yaml --resume --quiet > resume.log 2>&1 || { cat resume.log; die "resume failed"; }
losses ref/metrics.jsonl > ref.losses
losses run/metrics.jsonl > run.losses
cmp -s ref.losses run.losses || { diff ref.losses run.losses | head; die "the resumed losses differ from the uninterrupted run"; }
echo "stopped at step $stop_step of $STEPS; resumed losses match bit-exactly"
[ "${ASYNC:-0}" = 1 ] && { echo "ok: signal_stop_test (async)"; exit 0; }  # part 2 does not save

# 2. Two signals: the second exits at once with the signal's own status.
write_config twice.yaml corpus bytes twice $STEPS 0 1
"$MOE4D" train twice.yaml --quiet > twice.log 2>&1 &
single=$!
for _ in $(seq 600); do
  [ -f twice/metrics.jsonl ] && [ "$(wc -l < twice/metrics.jsonl)" -ge 2 ] && break
  sleep 0.1
done
# Two different signals, so that the kernel cannot merge them into one pending signal: whichever is
# handled first asks to stop, the other must end the process at once with its own status.
kill -INT $single
kill -TERM $single
rc=0
wait $single || rc=$?
[ $rc -eq 143 ] || [ $rc -eq 130 ] ||
  { cat twice.log; die "after two signals the exit status is $rc, expected 143 or 130 (killed by SIGTERM or SIGINT)"; }
echo "ok: signal_stop_test"
