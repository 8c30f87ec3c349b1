#!/usr/bin/env bash
# tests/checkpoint/sharded_memory_limit_test.sh MOE4D MPIEXEC... — a checkpoint larger than one rank's
# memory limit, saved sharded and resumed in another layout (docs/checkpoints.md). Every process runs
# under a data limit (ulimit -d, RLIMIT_DATA: the heap and private mappings) of LIMIT_KB, smaller than
# the checkpoint (values and both AdamW moments of ~52 M parameters, ~630 MB) and than the model's
# training state; each of 4 ranks holds a quarter of the experts (expert_parallel 4).
#   - a sharded save at step 1 (EP4) succeeds, its step directory is larger than the limit and verifies;
#   - it resumes in TP2 x EP2 under the same limit and saves step 2;
#   - the same run with checkpoint.format full trains its step, then rank 0 runs out of memory at the
#     save: a full save gathers the model on rank 0, which is what the sharded one never does.
moe4d_bin=$1
shift
MPIEXEC=("$@")
source "$(dirname "$0")/../cli/safety/common.sh" "$moe4d_bin"
LIMIT_KB=${LIMIT_KB:-500000}
# AddressSanitizer (scripts/test.sh --sanitize) maps terabytes of shadow memory and cannot start under
# a data limit: skipped there (exit 77, CTest's SKIP_RETURN_CODE).
if ldd "$MOE4D" 2>/dev/null | grep -q libasan; then echo "skipped: a sanitizer build cannot run under ulimit -d"; exit 77; fi

make_corpus corpus bytes
cat > big.yaml <<'YAML'
model:
  vocab_size: 384
  hidden_size: 512
  num_layers: 2
  num_heads: 4
  ffn_hidden_size: 2048
  seq_length: 8
  moe: {num_experts: 8, top_k: 2, layer_freq: 1}
parallel_config:
  expert_parallel: 4
  micro_batch_num: 1
train:
  global_batch_size: 4
  steps: 1
  seed: 7
  log_interval: 1
data:
  train: corpus/train.bin
  tokenizer: bytes
checkpoint:
  dir: run
  format: sharded
YAML
limited() { (ulimit -d "$LIMIT_KB" && "${MPIEXEC[@]}" -np 4 "$MOE4D" train big.yaml "$@"); }

limited > save.log 2>&1 || { cat save.log; die "the sharded save under a ${LIMIT_KB} KB data limit failed"; }
bytes=$(du -sb run/step_00000001 | cut -f1)
[ "$bytes" -gt $((LIMIT_KB * 1024)) ] || die "the checkpoint ($bytes bytes) is not larger than the limit (${LIMIT_KB} KB)"
"$MOE4D" ckpt verify run > verify.log 2>&1 || { cat verify.log; die "the sharded checkpoint does not verify"; }
echo "saved sharded under a ${LIMIT_KB} KB limit per rank: $bytes bytes"

limited --resume --set train.steps=2 --set parallel_config.tensor_parallel=2 --set parallel_config.expert_parallel=2 \
  > resume.log 2>&1 || { cat resume.log; die "the resume in TP2 x EP2 under the limit failed"; }
grep -q "resumed from run/step_00000001 (step 1)" resume.log || { cat resume.log; die "did not resume from step 1"; }
[ -f run/step_00000002/MANIFEST.json ] || { cat resume.log; die "the resumed run wrote no checkpoint of step 2"; }
echo "resumed in TP2 x EP2 and saved step 2"

if limited --set checkpoint.dir=run-full --set checkpoint.format=full > full.log 2>&1; then
  cat full.log; die "a full save under the same limit succeeded: the limit does not bite, the test shows nothing"
fi
grep -q "step     1/1" full.log || { cat full.log; die "the full-format run failed before its step, not at the save"; }
grep -q "error (rank 0): out of memory" full.log || { cat full.log; die "the full save did not fail on rank 0 for memory"; }
[ ! -d run-full/step_00000001 ] || die "a failed full save left a step directory"
echo "a full save under the same limit fails on rank 0 (out of memory), as expected"
