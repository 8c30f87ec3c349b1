#!/usr/bin/env bash
# tests/checkpoint/sharded_kill_test.sh MOE4D MPIEXEC... — fault injection of sharded saves: a DP2 run
# with checkpoint.format sharded and a checkpoint every step is killed with SIGKILL at a random
# moment, 20 times — one rank, or every rank and mpirun — and resumed each time. After every kill:
#   - `moe4d ckpt verify` passes: every step directory that exists verifies, `latest` names one;
#   - no step_<N> directory lacks its manifest (a partial save never appears under a final name);
#   - the next --resume starts from the newest step directory (never an older one, never step 0).
# The trials whose kill left a temporary directory (a save caught mid-write) are counted.
# ASYNC=1: the same with checkpoint.async: true (a save is in flight at almost every moment: each
# step starts one, whose background writes overlap the next step).
moe4d_bin=$1
shift
MPIEXEC=("$@")
source "$(dirname "$0")/../cli/safety/common.sh" "$moe4d_bin"
TRIALS=${TRIALS:-20}

make_corpus corpus bytes
write_config run.yaml corpus bytes run 100000 1 2
echo "  format: sharded" >> run.yaml
if [ "${ASYNC:-0}" = 1 ]; then echo "  async: true" >> run.yaml; fi

RANDOM=29  # reproducible kill times and victims
mid_save=0
newest() {  # the highest step of a step directory, or nothing
  local dir best=""
  for dir in run/step_*; do
    [ -d "$dir" ] || continue
    local n=$((10#${dir#run/step_}))
    if [ -z "$best" ] || [ "$n" -gt "$best" ]; then best=$n; fi
  done
  echo "$best"
}
for trial in $(seq 1 "$TRIALS"); do
  before=$(newest)
  "${MPIEXEC[@]}" -np 2 "$MOE4D" train run.yaml --resume > "train-$trial.log" 2>&1 &
  launcher=$!
  # Wait until the run has started stepping, then a random 0.2 .. 1.4 s more.
  for _ in $(seq 1 300); do grep -q "resumed from\|starting from step 0" "train-$trial.log" 2>/dev/null && break; sleep 0.05; done
  sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.2 + (r % 1200) / 1000 }')"
  ranks=($(pgrep -f "$MOE4D train run.yaml" || true))
  [ ${#ranks[@]} -ge 1 ] || { cat "train-$trial.log"; die "trial $trial: no rank running to kill"; }
  if (( RANDOM % 2 )); then
    victim=${ranks[$((RANDOM % ${#ranks[@]}))]}
    kill -9 "$victim" 2>/dev/null || true
    what="rank pid $victim"
  else
    kill -9 "${ranks[@]}" "$launcher" 2>/dev/null || true
    what="every rank"
  fi
  wait "$launcher" 2>/dev/null || true
  # Ranks the launcher left behind (killed with it) must be gone before the next trial resumes.
  for pid in "${ranks[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 100); do pgrep -f "$MOE4D train run.yaml" > /dev/null || break; sleep 0.05; done
  ls -d run/.tmp-step_* > /dev/null 2>&1 && mid_save=$((mid_save + 1))

  # Resume point of this trial: the newest step it had reached must not be lost.
  if [ "$before" != "" ] && [ "$trial" -gt 1 ]; then
    grep -q "resumed from run/step_$(printf %08d "$before")" "train-$trial.log" ||
      { cat "train-$trial.log"; die "trial $trial resumed elsewhere, expected step $before (newest before it)"; }
  fi
  for dir in run/step_*; do
    [ -e "$dir" ] || continue
    [ -f "$dir/MANIFEST.json" ] || die "trial $trial ($what): $dir has no MANIFEST.json"
  done
  if [ -n "$(newest)" ]; then
    "$MOE4D" ckpt verify run > "verify-$trial.log" 2>&1 ||
      { cat "verify-$trial.log"; die "trial $trial ($what): a committed checkpoint does not verify"; }
  fi
  echo "trial $trial: killed $what; newest step $(newest)"
done
echo "$mid_save of $TRIALS kills left a save's temporary directory (caught mid-write)"
[ -n "$(newest)" ] || die "no checkpoint was ever written"
