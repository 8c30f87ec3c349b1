#!/usr/bin/env bash
# hostile_data.sh MOE4D WORKDIR CASE REGEX: prepares a small byte-tokenized corpus with `moe4d
# prepare`, damages the shard, header or tokenizer as CASE says (or, for out_of_memory, trains a
# model too big for a limited address space), and passes iff `moe4d train` on it
# fails with one error line matching REGEX (expect_error.sh). CASE "clean" instead expects the
# undamaged data to train (exit 0) twice, the second time through the shard's verified marker.
set -u
moe4d=$1 work=$2 case=$3 regex=$4
here=$(cd "$(dirname "$0")" && pwd)
dir=$work/$case
rm -rf "$dir" && mkdir -p "$dir"
for i in $(seq 1 400); do printf "document %d: the quick brown fox %d jumps over the lazy dog\n%%\n" "$i" "$((i * 7919 % 1000))"; done >"$dir/corpus.txt"
"$moe4d" prepare --input "$dir/corpus.txt" --doc-separator percent --output "$dir/data" --tokenizer bytes >"$dir/prepare.log" 2>&1 ||
  { echo "prepare failed:"; cat "$dir/prepare.log"; exit 1; }
tokenizer=bytes
model_vocab=260
ffn=48
python3 - "$dir/data" "$case" <<'PY' || exit 1
import hashlib, json, os, struct, sys
data, case = sys.argv[1], sys.argv[2]
binp, jsonp = os.path.join(data, "train.bin"), os.path.join(data, "train.json")
raw = bytearray(open(binp, "rb").read())
header = json.load(open(jsonp))
def save_bin(b): open(binp, "wb").write(bytes(b))
def save_header(h): open(jsonp, "w").write(json.dumps(h, indent=2) + "\n")
if case == "all_zero_bin":
    save_bin(bytes(len(raw)))
elif case == "flipped_byte":
    raw[len(raw) // 2] ^= 0x01; save_bin(raw)
elif case == "header_sha_mismatch":
    header["sha256"] = hashlib.sha256(b"another payload").hexdigest(); save_header(header)
elif case == "halved_num_tokens":
    header["num_tokens"] //= 2; save_header(header)
elif case == "halved_num_tokens_uint32":  # same byte count: the header now reads pairs of ids as one
    header["num_tokens"] //= 2; header["dtype"] = "uint32"; header["vocab_size"] = 70000; save_header(header)
elif case == "token_out_of_vocab":  # the header's sha256 is updated, so only the id scan can catch it
    struct.pack_into("<H", raw, 2 * 100, 300); save_bin(raw)
    header["sha256"] = hashlib.sha256(raw).hexdigest(); save_header(header)
elif case == "num_tokens_2p63":
    text = json.dumps(header, indent=2).replace('"num_tokens": %d' % header["num_tokens"], '"num_tokens": 9223372036854775808')
    open(jsonp, "w").write(text + "\n")
elif case == "valid_over_train":  # the smaller valid.bin copied over train.bin (found by fuzzing)
    save_bin(open(os.path.join(data, "valid.bin"), "rb").read())
elif case == "tokenizer_garbage":
    open(os.path.join(data, "garbage.model"), "wb").write(os.urandom(3000))
elif case == "tokenizer_directory":
    os.mkdir(os.path.join(data, "tokenizer_dir.model"))
PY
case $case in
  tokenizer_missing) tokenizer=$dir/data/no-such-tokenizer.model ;;
  tokenizer_directory) tokenizer=$dir/data/tokenizer_dir.model ;;
  tokenizer_garbage) tokenizer=$dir/data/garbage.model ;;
  model_vocab_too_small) model_vocab=256 ;;
  out_of_memory) ffn=1000000 ;;
  halved_num_tokens_uint32) model_vocab=70000 ;;
esac
cat >"$dir/config.yaml" <<YAML
model: {vocab_size: $model_vocab, hidden_size: 32, num_layers: 1, num_heads: 4, ffn_hidden_size: $ffn, seq_length: 16,
        moe: {num_experts: 2, top_k: 1}}
train: {global_batch_size: 2, steps: 1, log_interval: 1}
data: {train: $dir/data/train.bin, valid: $dir/data/valid.bin, tokenizer: $tokenizer}
checkpoint: {dir: $dir/ckpt}
YAML
if [ "$case" = clean ]; then
  touch -d '-1 minute' "$dir/data/train.bin" "$dir/data/valid.bin"  # old enough to be marked verified
  for run in 1 2; do
    "$moe4d" train "$dir/config.yaml" --quiet --start-over >"$dir/train$run.log" 2>&1 ||
      { echo "run $run failed:"; cat "$dir/train$run.log"; exit 1; }
  done
  [ -f "$dir/data/train.bin.verified" ] || { echo "no verified marker next to train.bin"; exit 1; }
  echo "ok: clean data trains; marker $(cat "$dir/data/train.bin.verified")"
  exit 0
fi
if [ "$case" = out_of_memory ]; then
  # 3 GiB of parameters and optimizer state pass the memory check on any machine with that much free
  # memory; a 1.2 GB address-space limit makes the allocation itself fail. AddressSanitizer (the
  # build of scripts/test.sh --sanitize) reserves terabytes of shadow address space and cannot start
  # under that limit: there its allocator's own limit fails the same 732 MB allocation.
  if ldd "$moe4d" 2>/dev/null | grep -q libasan; then
    export ASAN_OPTIONS="${ASAN_OPTIONS:-}:allocator_may_return_null=1:max_allocation_size_mb=500"
  else
    ulimit -v 1200000
  fi
fi
exec "$here/expect_error.sh" "$regex" "$moe4d" train "$dir/config.yaml"
