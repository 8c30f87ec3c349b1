#!/usr/bin/env bash
# first_hour.sh MOE4D WORKDIR CASE: what a new user meets in the first hour (issue 30, items 1, 8, 9).
# Each CASE prepares its own small corpus with `moe4d prepare` (two BPE tokenizers of 300 and 400
# ids over the same text, or bytes) and passes iff moe4d does what the case names; error cases go
# through expect_error.sh (exactly one "moe4d: error" line matching the regex, non-zero exit).
set -u
moe4d=$1 work=$2 case=$3
here=$(cd "$(dirname "$0")" && pwd)
expect=$here/expect_error.sh
dir=$work/$case
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }
for i in $(seq 1 300); do printf "document %d: the quick brown fox %d jumps over the lazy dog\n%%\n" "$i" "$((i * 7919 % 1000))"; done >corpus.txt
prep() {  # prep OUT ARGS...: moe4d prepare on corpus.txt into OUT
  local out=$1; shift
  "$moe4d" prepare --input corpus.txt --doc-separator percent --output "$out" "$@" >"$out.log" 2>&1 ||
    { cat "$out.log"; fail "prepare $out $*"; }
}
config() {  # config FILE TRAIN VALID TOKENIZER CKPT [FORMAT]: a tiny MoE, 2 steps
  {
    echo "model: {vocab_size: 512, hidden_size: 16, num_layers: 2, num_heads: 4, ffn_hidden_size: 24, seq_length: 16,"
    echo "        moe: {num_experts: 4, top_k: 2}}"
    echo "train: {global_batch_size: 2, steps: 2, log_interval: 1}"
    echo "data:"
    echo "  train: $2"
    [ -n "$3" ] && echo "  valid: $3"
    [ -n "$4" ] && echo "  tokenizer: $4"
    [ -n "${6:-}" ] && echo "  format: $6"
    echo "checkpoint: {dir: $5, interval: 2}"
  } >"$1"
}
case $case in
  config_tokenizer)  # shards of the 300-id tokenizer, data.tokenizer the 400-id one
    prep a --vocab-size 300 && prep b --vocab-size 400
    config c.yaml a/train.bin a/valid.bin b/tokenizer.model ckpt
    exec "$expect" "c\.yaml: tokenizer mismatch: data\.train .*/a/train\.json was made with tokenizer \(sentencepiece, 300 ids, model sha256 [0-9a-f]{12}\), but data\.tokenizer .*b/tokenizer\.model is \(sentencepiece, 400 ids" "$moe4d" train c.yaml ;;
  valid_other)  # train and valid made with different tokenizers (same vocabulary bound would pass the id checks)
    prep a --vocab-size 300 && prep b --vocab-size 400
    config c.yaml b/train.bin a/valid.bin "" ckpt
    exec "$expect" "tokenizer mismatch: data\.valid .*/a/valid\.json was made with tokenizer \(sentencepiece, 300 ids.*\), but data\.train .*/b/train\.json was made with \(sentencepiece, 400 ids" "$moe4d" train c.yaml ;;
  checkpoint)  # a run trained with one tokenizer, resumed with data of another
    prep a --vocab-size 300 && prep b --vocab-size 400
    config c.yaml a/train.bin a/valid.bin a/tokenizer.model ckpt
    "$moe4d" train c.yaml >train.log 2>&1 || { cat train.log; fail "first run"; }
    config c.yaml b/train.bin b/valid.bin b/tokenizer.model ckpt
    exec "$expect" "tokenizer mismatch: checkpoint ckpt/step_00000002 was trained with tokenizer \(sentencepiece, 300 ids.*\), but this run's tokenizer .*b/tokenizer\.model .* is \(sentencepiece, 400 ids" "$moe4d" train c.yaml --resume ;;
  eval_other)  # `moe4d eval` of a checkpoint on a shard of another tokenizer
    prep a --vocab-size 300 && prep b --vocab-size 400
    config c.yaml a/train.bin a/valid.bin a/tokenizer.model ckpt
    "$moe4d" train c.yaml >train.log 2>&1 || { cat train.log; fail "train"; }
    "$moe4d" eval ckpt --data a/valid.bin >eval.log 2>&1 || { cat eval.log; fail "eval on the run's own valid shard"; }
    exec "$expect" "tokenizer mismatch: checkpoint .*ckpt/step_00000002 was trained with tokenizer \(sentencepiece, 300 ids.*\), but --data .*b/valid\.json was made with \(sentencepiece, 400 ids" "$moe4d" eval ckpt --data b/valid.bin ;;
  megatron)  # the Megatron format records the tokenizer in its sidecar
    prep a --vocab-size 300 --output-format megatron && prep b --vocab-size 400
    [ -f a/train.tokenizer.json ] || fail "no sidecar a/train.tokenizer.json"
    config c.yaml a/train a/valid b/tokenizer.model ckpt megatron
    exec "$expect" "tokenizer mismatch: data\.train .*/a/train\.tokenizer\.json was made with tokenizer \(sentencepiece, 300 ids" "$moe4d" train c.yaml ;;
  same_tokenizer)  # the matching inputs train, also resumed; the checkpoint carries the tokenizer
    prep a --vocab-size 300
    config c.yaml a/train.bin a/valid.bin a/tokenizer.model ckpt
    "$moe4d" train c.yaml >train.log 2>&1 || { cat train.log; fail "train"; }
    grep -q "WARNING" train.log && { cat train.log; fail "a warning on matching inputs"; }
    sed -i 's/steps: 2,/steps: 4,/' c.yaml
    "$moe4d" train c.yaml --resume >resume.log 2>&1 || { cat resume.log; fail "resume"; }
    grep -q "resumed from" resume.log || { cat resume.log; fail "did not resume"; }
    echo "ok: trained and resumed with one tokenizer" ;;
  legacy_header)  # shards made before identities were recorded: one warning, and training goes on
    prep a --tokenizer bytes
    python3 - a <<'PY' || exit 1
import json, os, sys
for split in ("train", "valid"):
    p = os.path.join(sys.argv[1], split + ".json")
    h = json.load(open(p)); del h["tokenizer_identity"]; open(p, "w").write(json.dumps(h, indent=2) + "\n")
PY
    config c.yaml a/train.bin a/valid.bin bytes ckpt
    "$moe4d" train c.yaml >train.log 2>&1 || { cat train.log; fail "a shard without an identity must still train"; }
    n=$(grep -c "WARNING: 2 token files record no tokenizer identity" train.log)
    [ "$n" -eq 1 ] || { cat train.log; fail "expected one warning about the 2 older headers, got $n"; }
    echo "ok: $(grep WARNING train.log)" ;;
  no_valid)  # prepare --valid-fraction 0 writes no valid shard; train runs without data.valid
    prep a --tokenizer bytes
    prep a --tokenizer bytes --valid-fraction 0  # over the first: the old valid.* must go
    ls a/valid.* >/dev/null 2>&1 && fail "a valid shard was left: $(ls a/valid.*)"
    grep -q "^valid: *none" a.log || { cat a.log; fail "the summary does not say there is no valid split"; }
    config c.yaml a/train.bin "" bytes ckpt
    "$moe4d" train c.yaml >train.log 2>&1 || { cat train.log; fail "train without data.valid"; }
    grep -q "data.valid not set" train.log || { cat train.log; fail "the start of the run does not say data.valid is unset"; }
    echo "ok: no valid shard, trained without data.valid" ;;
  min_valid_with_zero)
    exec "$expect" "--min-valid-documents 3 was given with --valid-fraction 0" \
      "$moe4d" prepare --input corpus.txt --output a --tokenizer bytes --valid-fraction 0 --min-valid-documents 3 ;;
  summary_names_input)  # the summary says where the corpus was read from and where the files went
    prep a --tokenizer bytes
    grep -q "^input: *corpus.txt" a.log || { cat a.log; fail "no input: line naming corpus.txt"; }
    grep -q "^train: *a/train.bin" a.log || { cat a.log; fail "no train: line naming a/train.bin"; }
    echo "ok: $(grep '^input:' a.log)" ;;
  demo_corpus_note)  # no --input: the demo corpus is named on the terminal (before it is read, or refused)
    "$moe4d" prepare --output a --tokenizer bytes >a.log 2>&1
    grep -q "no --input given: reading the demo corpus /usr/share/games/fortunes" a.log || { cat a.log; fail "no note"; }
    echo "ok: $(grep 'no --input' a.log)" ;;
  resume_nothing_warns)  # --resume with an empty checkpoint.dir: a WARNING naming the directory, then step 0
    prep a --tokenizer bytes
    config c.yaml a/train.bin a/valid.bin bytes typo-ckpt
    "$moe4d" train c.yaml --resume >train.log 2>&1 || { cat train.log; fail "--resume must stay tolerant"; }
    grep -q "WARNING: --resume: no checkpoint in $dir/typo-ckpt .*STARTS FROM STEP 0" train.log ||
      { cat train.log; fail "no warning naming $dir/typo-ckpt"; }
    echo "ok: $(grep WARNING train.log)" ;;
  resume_strict_nothing)
    prep a --tokenizer bytes
    config c.yaml a/train.bin a/valid.bin bytes typo-ckpt
    "$expect" "--resume-strict: no checkpoint in .*/typo-ckpt \(checkpoint\.dir 'typo-ckpt' in c\.yaml does not exist\)" \
      "$moe4d" train c.yaml --resume-strict || exit 1
    [ -e typo-ckpt ] && fail "--resume-strict created typo-ckpt"
    mkdir typo-ckpt
    exec "$expect" "--resume-strict: no checkpoint in .*/typo-ckpt \(checkpoint\.dir 'typo-ckpt' in c\.yaml\)" \
      "$moe4d" train c.yaml --resume-strict ;;
  resume_strict_resumes)
    prep a --tokenizer bytes
    config c.yaml a/train.bin a/valid.bin bytes ckpt
    "$moe4d" train c.yaml >train.log 2>&1 || { cat train.log; fail "train"; }
    sed -i 's/steps: 2,/steps: 3,/' c.yaml
    "$moe4d" train c.yaml --resume-strict >resume.log 2>&1 || { cat resume.log; fail "resume-strict"; }
    grep -q "resumed from .*step_00000002" resume.log || { cat resume.log; fail "did not resume"; }
    echo "ok: --resume-strict resumed" ;;
  *) fail "unknown case $case" ;;
esac
