# tests/cli/safety/common.sh — shared set-up of the run-safety CLI tests: a scratch folder, a token
# corpus made by `moe4d prepare`, and a tiny MoE config written next to it. Sourced, not run.
#   usage: source common.sh MOE4D_BINARY
set -euo pipefail
MOE4D=$1
[ -x "$MOE4D" ] || { echo "not an executable: $MOE4D"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/moe4d-safety-XXXXXX")
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf --one-file-system "$WORK"' EXIT
cd "$WORK"

die() { echo "FAIL: $*"; exit 1; }
# The corpus: a few licence texts from base-files (present on every Debian).
make_corpus() {  # make_corpus DIR bytes|bpe
  mkdir -p "$WORK/text"
  cp /usr/share/common-licenses/GPL-3 "$WORK/text/gpl.txt"
  cp /usr/share/common-licenses/Apache-2.0 "$WORK/text/apache.txt"
  cp /usr/share/common-licenses/MPL-2.0 "$WORK/text/mpl.txt"
  if [ "$2" = bpe ]; then
    "$MOE4D" prepare --input "$WORK/text" --output "$1" --tokenizer bpe --vocab-size 384 > prepare.log 2>&1 ||
      { cat prepare.log; die "prepare failed"; }
  else
    "$MOE4D" prepare --input "$WORK/text" --output "$1" --tokenizer bytes > prepare.log 2>&1 ||
      { cat prepare.log; die "prepare failed"; }
  fi
}
# write_config FILE DATA_DIR TOKENIZER CKPT_DIR STEPS INTERVAL [DP]: relative paths on purpose.
write_config() {
  cat > "$1" <<YAML
model:
  vocab_size: 384
  hidden_size: 16
  num_layers: 2
  num_heads: 4
  ffn_hidden_size: 24
  seq_length: 16
  moe: {num_experts: 4, top_k: 2, layer_freq: 2}
parallel_config:
  data_parallel: ${7:-1}
  micro_batch_num: 1
train:
  global_batch_size: 4
  steps: $5
  lr: 3.0e-3
  min_lr: 3.0e-4
  warmup_steps: 2
  seed: 7
  log_interval: 1000
data:
  train: $2/train.bin
  tokenizer: $3
checkpoint:
  dir: $4
  interval: $6
  keep: 3
YAML
}
# Checksums of every file under a folder (path and content), sorted.
tree_sums() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
# The "loss" of every metrics line, one per line, as "step loss" (full precision).
losses() {
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(r["step"], repr(r["loss"]))' "$1"
}
