#!/usr/bin/env bash
# scripts/bench.sh — run every benchmark under bench/ one after another, each writing its JSON
# document to runs/bench/<name>.json (progress and errors on the terminal). Run it on a quiet
# machine: the benchmarks compare against this machine's own GEMM peak and raw MPI, measured in the
# same run, but other work on the cores still shows up as noise.
#
# usage: scripts/bench.sh [name ...]   names: train comm scaling moe pipeline zero precision plan data launch checkpoint
#        (default: all; the planner's calibration is separate: bench/calibrate/calibrate.sh)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
B=$ROOT/build/bench
OUT=$ROOT/runs/bench
mkdir -p "$OUT"
[[ -x $B/train/train_bench ]] || { echo "bench.sh: build first (scripts/test.sh or ninja -C build)" >&2; exit 2; }

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi() { local np=$1; shift; mpirun -np "$np" --oversubscribe --bind-to none "$@"; }

run() {
  local name=$1; shift
  echo "== $name: $* ($(uptime | sed 's/.*load average/load average/'))" >&2
  local start=$SECONDS
  "$@" >"$OUT/$name.json"
  echo "   -> runs/bench/$name.json ($((SECONDS - start)) s)" >&2
}

bench() {
  case "$1" in
    train) run train "$B/train/train_bench" 6 ;;
    comm) run comm mpi 2 "$B/comm/comm_bench" --max-mib=64 --iters=15 ;;
    scaling) run scaling mpi 2 "$B/scaling/scaling_bench" small 6 ;;
    moe) run moe_ep2 mpi 2 "$B/moe/moe_bench"
         run moe_ep4 mpi 4 "$B/moe/moe_bench"
         run replication_ep2 mpi 2 "$B/moe/replication_bench" ;;
    pipeline) run pipeline mpi 2 "$B/pipeline/pipeline_bench" --config="$ROOT/configs/tiny.yaml" ;;
    zero) run zero mpi 2 "$B/zero/zero_bench" --config="$ROOT/configs/tiny.yaml" ;;
    precision) run precision "$B/precision/precision_bench" 3 small ;;
    plan) run plan_search "$B/plan/plan_search_bench" ;;
    data) run shard_verify "$B/data/shard_verify_bench" --mib=512 ;;
    launch) run launch "$ROOT/bench/launch/launch_bench.sh" "$ROOT/build" 3 ;;
    checkpoint) run checkpoint mpi 4 "$B/checkpoint/checkpoint_bench" --config=tiny --seq=64 --steps=6 --zero=1 ;;
    *) echo "bench.sh: unknown benchmark '$1' (expected train comm scaling moe pipeline zero precision plan data launch checkpoint)" >&2
       exit 2 ;;
  esac
}

names=("$@")
[[ ${#names[@]} -gt 0 ]] || names=(train comm scaling moe pipeline zero precision plan data launch checkpoint)
for n in "${names[@]}"; do bench "$n"; done
