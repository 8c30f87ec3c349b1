#!/bin/bash
# bench/launch/launch_bench.sh — what `moe4d launch` costs on top of bare mpirun, for the same job.
#
# Two fake hosts on this machine (tests/launch/fake_rsh.sh: each 127.0.0.x in its own UTS namespace,
# its own orted; TCP over loopback), 2 ranks each, a tiny MoE for 2 steps without checkpoints. Each
# variant runs REPS times (default 3); the median wall time of each is printed as one JSON document:
#   bare_mpirun_s        mpirun -np 4 --host ... moe4d train CONFIG
#   launch_no_check_s    moe4d launch --no-check -- train CONFIG (placement, logs, supervision)
#   launch_s             moe4d launch -- train CONFIG (with the preflight on both hosts)
#   preflight_only_s     moe4d launch --check -- train CONFIG
# and the overheads launch_no_check_s - bare_mpirun_s and launch_s - bare_mpirun_s.
# Usage: bench/launch/launch_bench.sh BUILD_DIR [REPS]
set -euo pipefail
build=${1:?usage: launch_bench.sh BUILD_DIR [REPS]}
reps=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
bin=$(cd "$build" && pwd)/src/moe4d
rsh=$here/../../tests/launch/fake_rsh.sh
work=$(mktemp -d /tmp/moe4d-launch-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export OMPI_MCA_plm_rsh_agent=$rsh
mca="--mca btl tcp,self --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo"

mkdir -p "$work/corpus"
for d in $(seq 1 20); do
  for l in $(seq 1 30); do echo "document $d line $l: the quick brown fox jumps over the lazy dog"; done > "$work/corpus/$d.txt"
done
"$bin" prepare --input "$work/corpus" --output "$work/data" --tokenizer bytes > /dev/null 2>&1
cat > "$work/job.yaml" <<YAML
model: {vocab_size: 320, hidden_size: 32, num_layers: 2, num_heads: 4, ffn_hidden_size: 48, seq_length: 16,
        moe: {num_experts: 4, top_k: 2, layer_freq: 2}}
parallel_config: {data_parallel: 2, tensor_parallel: 2, micro_batch_num: 1}
train: {global_batch_size: 8, steps: 2, lr: 1.0e-3, seed: 1, metrics_file: $work/metrics.jsonl}
data: {train: $work/data/train.bin}
YAML
printf '127.0.0.2 slots=2\n127.0.0.3 slots=2\n' > "$work/hosts"
cd "$work"

median_of() {  # command... -> median wall seconds over $reps runs
  local times=()
  for _ in $(seq 1 "$reps"); do
    local t0 t1
    t0=$(date +%s.%N)
    "$@" > /dev/null 2>&1
    t1=$(date +%s.%N)
    times+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')")
  done
  printf '%s\n' "${times[@]}" | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'
}

bare=$(median_of mpirun -np 4 --host 127.0.0.2:2,127.0.0.3:2 --map-by slot --bind-to none $mca "$bin" train job.yaml --quiet)
no_check=$(median_of "$bin" launch --hostfile hosts --no-check --mpi-arg "$mca" --log_dir logs -- train job.yaml --quiet)
full=$(median_of "$bin" launch --hostfile hosts --mpi-arg "$mca" --log_dir logs -- train job.yaml --quiet)
check=$(median_of "$bin" launch --hostfile hosts --check --mpi-arg "$mca" -- train job.yaml --quiet)
cpu=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')
awk -v b="$bare" -v n="$no_check" -v f="$full" -v c="$check" -v r="$reps" -v cpu="$cpu" 'BEGIN {
  printf "{\"benchmark\": \"launch\", \"hosts\": 2, \"ranks_per_host\": 2, \"reps\": %d, \"cpu\": \"%s\",\n", r, cpu
  printf " \"bare_mpirun_s\": %.3f, \"launch_no_check_s\": %.3f, \"launch_s\": %.3f, \"preflight_only_s\": %.3f,\n", b, n, f, c
  printf " \"overhead_no_check_s\": %.3f, \"overhead_with_preflight_s\": %.3f}\n", n - b, f - b
}'
