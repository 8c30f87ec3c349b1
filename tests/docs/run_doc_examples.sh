#!/usr/bin/env bash
# run_doc_examples.sh MOE4D SOURCE_DIR [WORK_DIR]: runs every ```sh block of README.md and docs/*.md.
#
# Each file's blocks run in order, in one fresh scratch folder per file, with `moe4d` (the build's
# binary) first on PATH and `configs/` linked in, over small fixtures made here: corpus/ and books/
# (licence texts), dump.jsonl.zst (their paragraphs as JSON lines), data/old/tokenizer.model (a BPE of
# 512 ids) and data/fortunes (the layout `scripts/demo.sh` prepares, a 4096-id BPE over the licence
# texts, so that configs/*.yaml find their data). Every
# block runs under `bash -e` and must exit 0 within a time limit.
#
# A block the examples use as a file (a config) is preceded by `<!-- doc-test: file NAME -->` and is
# written to NAME in the folder before the file's sh blocks run.
#
# A block that cannot run here carries, on the line right before its ```sh, the marker
#   <!-- doc-test: skip REASON -->
# and the REASON is printed; a marker without a reason fails the test, as does a file whose sh
# blocks are all skipped without the test noticing (the counts are printed at the end).
set -u
moe4d=$(realpath "$1") src=$(realpath "$2")
work=${3:-$(mktemp -d "${TMPDIR:-/tmp}/moe4d-docs-XXXXXX")}
mkdir -p "$work" && work=$(realpath "$work")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OPENBLAS_NUM_THREADS=1
block_limit=${DOC_TEST_BLOCK_SECONDS:-90}
fail() { echo "FAIL: $*"; exit 1; }

# Fixtures, made once and copied into each file's folder.
fixtures=$work/fixtures
rm -rf "$fixtures" && mkdir -p "$fixtures/bin" "$fixtures/corpus" "$fixtures/books" "$fixtures/data" || exit 1
ln -s "$moe4d" "$fixtures/bin/moe4d"
# The corpus: the licence texts of base-files (on every Debian; varied enough for a 4096-id BPE).
for f in GPL-3 GPL-2 LGPL-2.1 Apache-2.0 MPL-2.0 Artistic GFDL-1.3; do
  cp "/usr/share/common-licenses/$f" "$fixtures/corpus/$f.txt" || fail "no /usr/share/common-licenses/$f"
done
cp "$fixtures/corpus/GPL-3.txt" "$fixtures/corpus/Apache-2.0.txt" "$fixtures/books/"
python3 - "$fixtures/corpus" >"$fixtures/dump.jsonl" <<'PY' || fail "fixture dump.jsonl"
import json, os, sys
for name in sorted(os.listdir(sys.argv[1])):
    for paragraph in open(os.path.join(sys.argv[1], name)).read().split("\n\n"):
        if paragraph.strip(): print(json.dumps({"text": paragraph}))
PY
zstd -q --rm "$fixtures/dump.jsonl" -o "$fixtures/dump.jsonl.zst" || fail "zstd could not write the fixture dump.jsonl.zst"
"$moe4d" prepare --input "$fixtures/corpus" --output "$fixtures/data/old" --vocab-size 512 >"$work/fixture-old.log" 2>&1 ||
  { cat "$work/fixture-old.log"; fail "fixture data/old"; }
"$moe4d" prepare --input "$fixtures/corpus" --output "$fixtures/data/fortunes" \
  >"$work/fixture-fortunes.log" 2>&1 || { cat "$work/fixture-fortunes.log"; fail "fixture data/fortunes"; }

ran=0 skipped=0
for doc in "$src/README.md" "$src"/docs/*.md; do
  name=${doc#"$src"/}
  # Blocks as files: block-N.sh, and block-N.skip holding the reason when marked.
  dir=$work/$(echo "$name" | tr '/.' '__')
  rm -rf "$dir" && mkdir -p "$dir/blocks" && cp -r "$fixtures/." "$dir/run" && ln -s "$src/configs" "$dir/run/configs"
  awk -v out="$dir/blocks" -v run="$dir/run" '
    /^```sh[ \t]*$/ { n++; inside = 1; file = sprintf("%s/block-%02d.sh", out, n); printf "" > file
                      if (prev ~ /<!-- doc-test: skip/) { r = prev; sub(/.*<!-- doc-test: skip */, "", r); sub(/ *-->.*/, "", r)
                                                         printf "%s", (r == "" ? "-" : r) > sprintf("%s/block-%02d.skip", out, n) }
                      printf "%d\n", NR > sprintf("%s/block-%02d.line", out, n); next }
    /^```/ && !inside && prev ~ /<!-- doc-test: file / {
                      f = prev; sub(/.*<!-- doc-test: file */, "", f); sub(/ *-->.*/, "", f)
                      inside = 1; file = run "/" f; printf "" > file; next }
    inside && /^```/ { inside = 0; close(file); prev = ""; next }
    inside { print >> file; next }
    NF { prev = $0 }' "$doc"
  for block in "$dir"/blocks/block-*.sh; do
    [ -e "$block" ] || continue
    line=$(cat "${block%.sh}.line")
    if [ -e "${block%.sh}.skip" ]; then
      reason=$(cat "${block%.sh}.skip")
      [ "$reason" = "-" ] && fail "$name:$line: a doc-test skip marker without a reason"
      echo "skip $name:$line ($reason)"
      skipped=$((skipped + 1))
      continue
    fi
    log=${block%.sh}.log
    start=$SECONDS
    if ! (cd "$dir/run" && PATH="$dir/run/bin:$PATH" timeout "$block_limit" bash -e "$block") >"$log" 2>&1; then
      echo "--- $name:$line"; cat "$block"; echo "--- output"; tail -40 "$log"
      fail "$name:$line: the example above did not run (exit status non-zero, or over ${block_limit}s)"
    fi
    echo "ok   $name:$line ($((SECONDS - start)) s)"
    ran=$((ran + 1))
  done
done
echo "ran $ran doc examples, skipped $skipped (marked, reasons above)"
[ "$ran" -gt 0 ] || fail "no doc example ran"
