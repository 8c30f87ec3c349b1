#!/usr/bin/env bash
# tests/cli/safety/stop_exit_test.sh MOE4D MPIEXEC... — a requested stop is no failure (issue 30):
#  1. Ctrl-C (SIGINT) and SIGTERM to the process group of `moe4d launch ... -- train CFG --resume`
#     (as a terminal or a batch system sends them): the launcher forwards the request to every rank
#     as SIGUSR1 through mpirun, the ranks finish the step, checkpoint, draw the pictures, and the
#     job exits 0, saying "stopped by ... after step N; checkpoint ..." exactly once on the terminal;
#  2. plain mpirun: SIGUSR1 to mpirun (forwarded to every rank) does the same, exit 0; a SIGINT to
#     mpirun's process group (Ctrl-C) is OpenMPI's abort: mpirun exits 1 whatever the ranks do
#     (docs/checkpoints.md says so), and a "stopped by" line, when the ranks made it, names a
#     checkpoint that is there;
#  3. a config error on 4 ranks says nothing about a stop (mpirun's teardown signals are no stop).
moe4d_bin=$1
shift
MPIEXEC=("$@")
source "$(dirname "$0")/common.sh" "$moe4d_bin"

make_corpus corpus bytes
STEPS=3000  # far more than the test waits for: the signal lands mid-run
stop_line='stopped by SIG[A-Z0-9]+ after step [0-9]+ of'

# start_job LOG CMD...: CMD in a new session (its own process group, like a terminal's job).
start_job() {
  local log=$1
  shift
  setsid "$@" > "$log" 2>&1 &
  job=$!
}
# wait_steps DIR N: until DIR/metrics.jsonl has N lines.
wait_steps() {
  for _ in $(seq 1200); do
    [ -f "$1/metrics.jsonl" ] && [ "$(wc -l < "$1/metrics.jsonl")" -ge "$2" ] && return 0
    kill -0 $job 2> /dev/null || return 1
    sleep 0.1
  done
  return 1
}
# check_stopped LOG DIR: one stop line, its checkpoint there, the pictures drawn.
check_stopped() {
  local count
  count=$(grep -Ec "$stop_line" "$1" || true)
  [ "$count" -eq 1 ] || { cat "$1"; die "$1: $count 'stopped by' lines, expected exactly one"; }
  local step
  step=$(grep -Eo "after step [0-9]+" "$1" | grep -Eo "[0-9]+")
  local ckpt
  ckpt=$(printf '%s/step_%08d' "$2" "$step")
  grep -Eq "$stop_line.*checkpoint $ckpt \(continue with --resume\)" "$1" || { cat "$1"; die "$1: the line does not name $ckpt"; }
  [ -f "$ckpt/MANIFEST.json" ] || die "no checkpoint $ckpt"
  "$MOE4D" ckpt verify "$ckpt" > /dev/null || die "$ckpt does not verify"
  for picture in index.html loss.svg step_time.svg; do
    [ -s "$2/$picture" ] || { cat "$1"; die "no $2/$picture: the pictures were not drawn at the stop"; }
  done
  ! grep -q "job failed" "$1" || { cat "$1"; die "$1 calls the stop a failure"; }
}

# 1. moe4d launch, with --resume (continuing a run that already has a checkpoint), SIGINT and SIGTERM.
write_config launch.yaml corpus bytes launched $STEPS 0 2
"${MPIEXEC[@]}" -np 2 "$MOE4D" train launch.yaml --quiet --exit-after 2 > first.log 2>&1 || { cat first.log; die "first run failed"; }
for sig in INT TERM; do
  rm -f launched/*.svg launched/index.html
  start_job launch_$sig.log "$MOE4D" launch --worker-num 2 --oversubscribe --no-check --log-dir logs_$sig \
    --mpi-arg "--bind-to none" -- train launch.yaml --resume --quiet
  before=$(wc -l < launched/metrics.jsonl)
  wait_steps launched $((before + 3)) || { cat launch_$sig.log; die "launch: no progress"; }
  kill -$sig -- -$job
  rc=0
  wait $job || rc=$?
  [ $rc -eq 0 ] || { cat launch_$sig.log; die "launch stopped by SIG$sig exited $rc, expected 0"; }
  check_stopped launch_$sig.log launched
  grep -q "job stopped by SIG$sig" launch_$sig.log || { cat launch_$sig.log; die "the launcher does not say it stopped on SIG$sig"; }
  echo "ok: launch, SIG$sig: $(grep -Eo "$stop_line [0-9]+" launch_$sig.log)"
done

# 2. plain mpirun: SIGUSR1 to mpirun is the clean stop (exit 0) ...
write_config plain.yaml corpus bytes plain $STEPS 0 2
start_job usr1.log "${MPIEXEC[@]}" -np 2 "$MOE4D" train plain.yaml --quiet
wait_steps plain 3 || { cat usr1.log; die "mpirun: no progress"; }
kill -USR1 $job
rc=0
wait $job || rc=$?
[ $rc -eq 0 ] || { cat usr1.log; die "mpirun after SIGUSR1 exited $rc, expected 0"; }
check_stopped usr1.log plain
echo "ok: mpirun, SIGUSR1 to mpirun: exit 0"

# ... and Ctrl-C at mpirun is OpenMPI's abort: exit 1 (documented), never a hang or a signal status.
write_config ctrlc.yaml corpus bytes ctrlc $STEPS 0 2
start_job ctrlc.log "${MPIEXEC[@]}" -np 2 "$MOE4D" train ctrlc.yaml --quiet
wait_steps ctrlc 3 || { cat ctrlc.log; die "mpirun: no progress"; }
kill -INT -- -$job
rc=0
wait $job || rc=$?
[ $rc -eq 1 ] || { cat ctrlc.log; die "mpirun after Ctrl-C exited $rc; docs/checkpoints.md says OpenMPI's mpirun exits 1"; }
if grep -Eq "$stop_line" ctrlc.log; then
  step=$(grep -Eo "after step [0-9]+" ctrlc.log | grep -Eo "[0-9]+")
  [ -f "$(printf 'ctrlc/step_%08d' "$step")/MANIFEST.json" ] || die "Ctrl-C: the named checkpoint is missing"
fi
echo "ok: mpirun, Ctrl-C: exit 1 (OpenMPI's)"

# 3. A set-up error on 4 ranks: one error line, no word of a stop (three times: the teardown races).
write_config bad.yaml corpus bytes bad $STEPS 0 4
sed -i 's/^  seed: 7/  seed: 7\n  grad_clip: -1/' bad.yaml
for i in 1 2 3; do
  rc=0
  "${MPIEXEC[@]}" -np 4 "$MOE4D" train bad.yaml > bad.log 2>&1 || rc=$?
  [ $rc -ne 0 ] || die "a config error exited 0"
  grep -q "train.grad_clip: expected a non-negative number" bad.log || { cat bad.log; die "no grad_clip error"; }
  ! grep -qi "stop requested\|stopped by" bad.log || { cat bad.log; die "a config error was reported as a stop"; }
done
echo "ok: stop_exit_test"
