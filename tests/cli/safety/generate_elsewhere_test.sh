#!/usr/bin/env bash
# tests/cli/safety/generate_elsewhere_test.sh MOE4D — checkpoints are self-contained: a run on a
# BPE corpus whose config uses relative paths; then the corpus folder is moved away and
# `moe4d generate CKPT` works from another directory with the tokenizer the checkpoint carries.
# Also: a missing data file is named with its resolved absolute path and what it was resolved against.
source "$(dirname "$0")/common.sh" "$1"

make_corpus corpus bpe
write_config run.yaml corpus corpus/tokenizer.model run 3 0
"$MOE4D" train run.yaml --quiet > train.log 2>&1 || { cat train.log; die "training failed"; }
ckpt=$WORK/run/step_00000003
[ -f "$ckpt/tokenizer.model" ] || die "the checkpoint carries no tokenizer.model"
cmp -s "$ckpt/tokenizer.model" corpus/tokenizer.model || die "the carried tokenizer differs from the corpus's"
python3 - "$ckpt" "$WORK" <<'PY' || die "state.json does not record the tokenizer checksum and absolute data paths"
import hashlib, json, sys
ckpt, work = sys.argv[1], sys.argv[2]
state = json.load(open(ckpt + '/state.json'))
sha = hashlib.sha256(open(ckpt + '/tokenizer.model', 'rb').read()).hexdigest()
assert state['tokenizer']['sha256'] == sha, state['tokenizer']
assert json.load(open(ckpt + '/MANIFEST.json'))['files']['tokenizer.model']['sha256'] == sha
assert 'train: ' + work + '/corpus/train.bin' in state['config'], state['config']
assert 'tokenizer: ' + work + '/corpus/tokenizer.model' in state['config'], state['config']
PY

mv corpus corpus-moved-away
mkdir elsewhere && cd elsewhere
"$MOE4D" generate "$ckpt" --prompt "the" --tokens 8 --seed 1 > gen.log 2>&1 || { cat gen.log; die "generate failed without the corpus"; }
[ -s gen.log ] || die "generate printed nothing"
cd "$WORK"

# The corpus is gone: training names the resolved path and the working directory it came from.
if "$MOE4D" train run.yaml --resume --quiet > missing.log 2>&1; then die "training without the corpus succeeded"; fi
grep -qF "moe4d: error: data.train: token shard header $WORK/corpus/train.json does not exist (data.train 'corpus/train.bin' in run.yaml is relative, resolved against the working directory $WORK)" missing.log ||
  { cat missing.log; die "the missing file is not named with its resolved path"; }
echo "ok: generate_elsewhere_test"
