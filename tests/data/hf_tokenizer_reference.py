#!/usr/bin/python3
"""Independent reference for moe4d's Hugging Face tokenizer.json support (src/data/hf_tokenizer.h).

The `tokenizers` library is not available, so this is a small implementation of its semantics that
shares no code with moe4d: the pre-tokenizer regexes run on Python's `re`, with \\p{X} and \\s
rewritten into explicit character classes built from `unicodedata` (Python's `re` has no \\p{..});
NFC is `unicodedata.normalize`; BPE is GPT-2's original merge loop (all occurrences of the
lowest-ranked pair per sweep); added tokens are cut out by a longest-first alternation.

For each of four tokenizer.json layouts — GPT-2 (ByteLevel with its own regex, "a b" merges),
Llama-3 (Split \\p{N}{1,3}, ignore_merges, [a, b] merges), Qwen2/Qwen3 (Split \\p{N}, NFC) and
DeepSeek-V3 (three Splits, an empty normalizer Sequence) — it trains a tiny byte-level BPE on a
training text, writes the fixture, encodes a mixed corpus (English, code, digits, CJK, emoji,
whitespace runs, combining marks, special tokens, random mixtures), runs
`hf_tokenizer_encode` (moe4d's tokenizer) on the same texts, and requires identical ids and exact
round trips. It also runs `moe4d prepare --tokenizer-model` on one fixture and requires the shard's
ids to be the reference's, each document followed by the end-of-text id, then trains two steps on
that shard, evaluates, and requires `moe4d generate` (tokenizer from the checkpoint) to encode its
prompt as the reference does.

usage: hf_tokenizer_reference.py HF_TOKENIZER_ENCODE MOE4D WORK_DIR
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import unicodedata
from collections import Counter

# ----------------------------------------------------------------------------------------------
# Unicode classes as Python `re` class bodies.

WHITE_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
               (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)]  # PropList.txt


def _ranges(pred):
    out, start = [], None
    for cp in range(0x110000):
        if pred(cp):
            if start is None:
                start = cp
        elif start is not None:
            out.append((start, cp - 1))
            start = None
    if start is not None:
        out.append((start, 0x10FFFF))
    return out


def _body(ranges):
    esc = lambda cp: "\\U%08x" % cp
    return "".join(esc(a) if a == b else esc(a) + "-" + esc(b) for a, b in ranges)


_CATEGORY_BODY = {}


def category_body(letter):
    if letter not in _CATEGORY_BODY:
        _CATEGORY_BODY[letter] = _body(_ranges(lambda cp: unicodedata.category(chr(cp))[0] == letter))
    return _CATEGORY_BODY[letter]


SPACE_BODY = _body(WHITE_SPACE)


def translate(pattern):
    """Rewrites \\p{X}, \\P{X} (outside classes), \\s and \\S for Python's `re`."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            e = pattern[i + 1]
            if e in "pP":
                letter = pattern[i + 3] if pattern[i + 2] == "{" else pattern[i + 2]
                length = 5 if pattern[i + 2] == "{" else 3
                assert len(letter) == 1
                body = category_body(letter)
                if in_class:
                    assert e == "p", "\\P inside a class is not needed by the patterns tested"
                    out.append(body)
                else:
                    out.append(("[" if e == "p" else "[^") + body + "]")
                i += length
                continue
            if e in "sS":
                if in_class:
                    assert e == "s"
                    out.append(SPACE_BODY)
                else:
                    out.append(("[" if e == "s" else "[^") + SPACE_BODY + "]")
                i += 2
                continue
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            if pattern[i + 1] == "^":
                out.append("^")
                i += 1
        elif c == "]" and in_class:
            in_class = False
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


# ----------------------------------------------------------------------------------------------
# The patterns as their tokenizer.json files spell them.

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2 = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
DEEPSEEK_V3 = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
]


def split(pattern):
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


def byte_level(use_regex):
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


VARIANTS = {
    "gpt2": dict(pre=byte_level(True), normalizer=None, pair_merges=False, ignore_merges=False),
    "llama3": dict(pre={"type": "Sequence", "pretokenizers": [split(LLAMA3), byte_level(False)]}, normalizer=None,
                   pair_merges=True, ignore_merges=True),
    "qwen2": dict(pre={"type": "Sequence", "pretokenizers": [split(QWEN2), byte_level(False)]},
                  normalizer={"type": "NFC"}, pair_merges=False, ignore_merges=False),
    "deepseek_v3": dict(pre={"type": "Sequence", "pretokenizers": [split(p) for p in DEEPSEEK_V3] + [byte_level(False)]},
                        normalizer={"type": "Sequence", "normalizers": []}, pair_merges=True, ignore_merges=False),
}

ADDED = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<tool>", False),
         ("<tool_call>", False)]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


BYTE_ENCODER = bytes_to_unicode()
BYTE_DECODER = {c: b for b, c in BYTE_ENCODER.items()}


def merge_pair(parts, pair):
    """GPT-2's sweep: every occurrence of `pair`, left to right."""
    merged, i = [], 0
    while i < len(parts):
        if i + 1 < len(parts) and (parts[i], parts[i + 1]) == pair:
            merged.append(parts[i] + parts[i + 1])
            i += 2
        else:
            merged.append(parts[i])
            i += 1
    return merged


class Reference:
    def __init__(self, tj):
        model = tj["model"]
        self.vocab = model["vocab"]
        merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks = {m: i for i, m in enumerate(merges)}
        self.ignore_merges = model.get("ignore_merges", False)
        norm = tj.get("normalizer") or {}
        self.nfc = norm.get("type") == "NFC"
        pre = tj["pre_tokenizer"]
        steps = pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
        self.regexes = []
        for s in steps:
            if s["type"] == "Split":
                self.regexes.append(re.compile(translate(s["pattern"]["Regex"])))
            elif s["type"] == "ByteLevel" and s["use_regex"]:
                self.regexes.append(re.compile(translate(GPT2)))
        self.added = {a["content"]: a["id"] for a in tj["added_tokens"]}
        contents = sorted(self.added, key=len, reverse=True)
        self.added_re = re.compile("|".join(re.escape(c) for c in contents))
        self.id_to_token = {i: t for t, i in self.vocab.items()}

    def pretokenize(self, text):
        pieces = [text]
        for rx in self.regexes:
            out = []
            for p in pieces:
                pos = 0
                for m in rx.finditer(p):
                    if m.start() > pos:
                        out.append(p[pos:m.start()])
                    if m.end() > m.start():
                        out.append(m.group())
                    pos = m.end()
                if pos < len(p):
                    out.append(p[pos:])
            pieces = out
        return ["".join(BYTE_ENCODER[b] for b in p.encode("utf-8")) for p in pieces]

    def bpe(self, word):
        if self.ignore_merges and word in self.vocab:
            return [word]
        parts = list(word)
        while len(parts) > 1:
            pairs = set(zip(parts, parts[1:]))
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            parts = merge_pair(parts, best)
        return parts

    def decode(self, ids):
        eos = self.added["<|endoftext|>"]
        added = {i: c for c, i in self.added.items()}
        out = bytearray()
        for i in ids:
            if i == eos:
                continue
            if i in added:
                out += added[i].encode("utf-8")
            else:
                out += bytes(BYTE_DECODER[c] for c in self.id_to_token[i])
        return out.decode("utf-8")

    def encode(self, text):
        ids, pos = [], 0
        segments = []
        for m in self.added_re.finditer(text):
            segments.append((text[pos:m.start()], None))
            segments.append((None, self.added[m.group()]))
            pos = m.end()
        segments.append((text[pos:], None))
        for seg, added in segments:
            if added is not None:
                ids.append(added)
                continue
            if not seg:
                continue
            if self.nfc:
                seg = unicodedata.normalize("NFC", seg)
            for word in self.pretokenize(seg):
                ids.extend(self.vocab[t] for t in self.bpe(word))
        return ids


def train_fixture(variant, training_text, merges_wanted=300):
    v = VARIANTS[variant]
    base = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": v["normalizer"], "pre_tokenizer": v["pre"], "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": v["ignore_merges"], "vocab": {}, "merges": []}}
    vocab = {BYTE_ENCODER[b]: i for i, b in enumerate(range(256))}
    base["model"]["vocab"] = vocab
    ref = Reference(base)
    text = unicodedata.normalize("NFC", training_text) if ref.nfc else training_text
    words = Counter(tuple(w) for w in ref.pretokenize(text))
    merges = []
    for _ in range(merges_wanted):
        pairs = Counter()
        for w, n in words.items():
            for p in zip(w, w[1:]):
                pairs[p] += n
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        vocab.setdefault(best[0] + best[1], len(vocab))
        new_words = Counter()
        for w, n in words.items():
            new_words[tuple(merge_pair(w, best))] += n
        words = new_words
    base["model"]["merges"] = [list(m) for m in merges] if v["pair_merges"] else [" ".join(m) for m in merges]
    for content, special in ADDED:
        base["added_tokens"].append({"id": len(vocab) + len(base["added_tokens"]), "content": content,
                                     "single_word": False, "lstrip": False, "rstrip": False,
                                     "normalized": False, "special": special})
    return base


# ----------------------------------------------------------------------------------------------
# Corpora.

TRAINING = """The quick brown fox jumps over the lazy dog. It's what they'd said: we'll see, you've won.
def main(argv):\n    for i in range(10):\n        print(f"value {i}: {argv[i]!r}")\n    return 0\n
int main() { std::vector<int> v = {1, 2, 3}; return v.size() > 2 ? 0 : 1; }
Prices rose 12.5% to $1,234,567.89 in 2026; call +1-555-0100. 人工智能正在改变世界。日本語のテキストとカタカナ。
Ünïcödé façade naïve café résumé — “quotes” ‘and’ dashes… 😀👍🏽 🇩🇪 IT'ſ 'ſt 'ſſ we'ſt
""" * 3


def corpus(fortunes):
    texts = [
        "Hello, world! I'm here; you're there. THEY'RE HERE AND I'LL GO. She's, he'd, we've.",
        "don't can't won't it's O'Neil's 'quoted' ''double'' 'S 'T IT'ſ 'ſ 'ſt we'ſſ \u212a'D",
        "def f(x):\n\treturn x ** 2  # square\n\n\nclass A:\n    pass\n",
        "if (a != b && c <= d) { x += 1; } // comment\r\n/* block */\r\n",
        "1 12 123 1234 12345 1234567890 3.14159 2026-12-02 0x1F 1e-5 ١٢٣ ½ Ⅻ",
        "你好世界，这是一个测试。人工智能！ 日本語のテキスト、ひらがなとカタカナ。 한국어 텍스트입니다.",
        "emoji 😀👍🏽 family 👨‍👩‍👧 flags 🇩🇪🇯🇵 keycap 1️⃣ zwj‍joiner",
        "spaces    between   words      and trailing    ",
        "   leading spaces",
        "\n\n\nnewlines\n\n  \n \t\n\tindented\n",
        "tabs\t\tand\u00a0nbsp\u3000ideographic\u2003em space\u2028line sep",
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|><|endoftext|>",
        "<tool_call>{\"name\": \"f\"}</tool_call><tool> <|im_end|x <|endoftext|<|endoftext|>",
        "e\u0301 a\u0308 A\u030a \u212b \u1100\u1161\u11a8 Å ḍ̇ q\u0307\u0323 \u0344 \u0958",
        "Ünïcödé façade naïve café résumé — “quotes” ‘and’ dashes…",
        "मराठी हिन्दी العربية עִבְרִית ไทย Ελληνικά Русский",
        "mixed: abc123def 9am x86_64 __init__ $var @user #tag %20 ...!!! ??? ;;",
        "",
        " ",
        "\r\n",
        "a",
    ]
    texts += fortunes
    rng = random.Random(20261202)
    pool = (list("abcXYZ'sStT ") + list("0123456789") + list(".,;:!?-_()[]{}\"'/\\@#$%^&*+=<>|~`") +
            [" ", " ", "  ", "\n", "\r", "\t", "\u00a0", "\u3000"] + list("你好世界日本語カタカナひらがな한국") +
            list("éüñøßÅ") + ["e\u0301", "\u0308", "\u0903", "\u0301"] + ["😀", "👍🏽", "🇩🇪", "\u200d"] +
            ["<|endoftext|>", "<|im_start|>", "<tool>", "<tool_call>", "'re", "'LL", "'d", "'ſ"] + list("١٢½Ⅻ"))
    for _ in range(300):
        texts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 40))))
    # Long pieces (moe4d merges them with a heap, the reference with GPT-2's loop).
    texts += ["".join(rng.choice("thequickbrown") for _ in range(1500)), " " * 700 + "x", "1" * 500, "\n" * 300]
    return texts


def read_fortunes(limit):
    path = "/usr/share/games/fortunes/fortunes"
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [d.strip("\n") for d in f.read().split("\n%\n")][:limit]


# ----------------------------------------------------------------------------------------------


def nfc_failures(encode_tool, work):
    """moe4d's NFC against unicodedata.normalize: every code point (in runs of 64), and random
    sequences of bases, combining marks (of several classes), Hangul jamo and composites."""
    texts = ["".join(chr(cp) for cp in range(start, start + 64) if not 0xD800 <= cp <= 0xDFFF)
             for start in range(0, 0x110000, 64)]
    rng = random.Random(7)
    pool = ([chr(c) for c in range(0x300, 0x370)] + list("aeiouAEIOUnNcCsSzZ") + ["\u1100", "\u1161", "\u11a8",
            "\uac00", "\uac01", "\u0f71", "\u0f72", "\u0f80", "\u05b0", "\u05bc", "\u0591", "\u093c", "\u0958",
            "\u1e0d", "\u1e0b", "\u0344", "\u212b", "\u00c5", "\u3099", "\u304b", "\u30cf", "\u309a", "\U0001d15e",
            "\U0001d165", "\u0b47", "\u0b3e", "\u0cc6", "\u0cd5", "\u0cc2"])
    texts += ["".join(rng.choice(pool) for _ in range(rng.randint(1, 12))) for _ in range(20000)]
    path, out = os.path.join(work, "nfc_texts.json"), os.path.join(work, "nfc_out.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
    subprocess.run([encode_tool, "--nfc", path, out], check=True)
    with open(out, encoding="utf-8") as f:
        got = json.load(f)["nfc"]
    bad = [i for i, (t, g) in enumerate(zip(texts, got)) if unicodedata.normalize("NFC", t) != g]
    print(f"nfc: {len(texts)} texts ({sum(map(len, texts))} code points): {len(texts) - len(bad)} equal")
    for i in bad[:5]:
        print(f"  MISMATCH {texts[i]!r}: reference {unicodedata.normalize('NFC', texts[i])!r}, moe4d {got[i]!r}")
    return len(bad) + (len(got) != len(texts))


def category_failures(encode_tool, work):
    """moe4d's general-category class of every code point against unicodedata's."""
    out = os.path.join(work, "categories.txt")
    subprocess.run([encode_tool, "--categories", out], check=True)
    got = open(out).read()
    bad = [cp for cp in range(0x110000) if got[cp:cp + 1] != unicodedata.category(chr(cp))[0]]
    print(f"categories: {len(got)} code points, {len(bad)} differ" + (f", e.g. U+{bad[0]:04X}" if bad else ""))
    return len(bad)


def main():
    encode_tool, moe4d, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    texts = corpus(read_fortunes(200))
    with open(os.path.join(work, "texts.json"), "w", encoding="utf-8") as f:
        json.dump(texts, f, ensure_ascii=False)
    failures = nfc_failures(encode_tool, work) + category_failures(encode_tool, work)
    for variant in VARIANTS:
        # Trained on the corpus itself too, so that its merges span the pieces' boundaries: a piece
        # split differently then gives different ids.
        tj = train_fixture(variant, TRAINING + "".join(texts[:300]), merges_wanted=800)
        path = os.path.join(work, variant + ".tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False, indent=1)
        ref = Reference(tj)
        expected = [ref.encode(t) for t in texts]
        out = os.path.join(work, variant + ".ids.json")
        subprocess.run([encode_tool, path, os.path.join(work, "texts.json"), out], check=True)
        with open(out) as f:
            got = json.load(f)
        bad = [i for i, (e, g) in enumerate(zip(expected, got["ids"])) if e != g]
        # Decoding: the reference's decode of the same ids; without NFC, the text itself (less the
        # end-of-text token, which decodes to nothing).
        eos_text = "<|endoftext|>"
        not_round = [i for i, d in enumerate(got["decoded"])
                     if d != ref.decode(expected[i]) or (not ref.nfc and d != texts[i].replace(eos_text, ""))]
        tokens = sum(len(e) for e in expected)
        print(f"{variant}: {len(texts)} texts, {tokens} tokens, {len(tj['model']['merges'])} merges: "
              f"{len(texts) - len(bad)} equal, {len(not_round)} decoded wrongly")
        for i in bad[:5]:
            print(f"  MISMATCH text {i} {texts[i]!r}\n    reference {expected[i]}\n    moe4d     {got['ids'][i]}")
        for i in not_round[:5]:
            print(f"  DECODE text {i} {texts[i]!r}: {got['decoded'][i]!r}")
        if len(got["ids"]) != len(texts) or got["eos_id"] != ref.added["<|endoftext|>"]:
            print(f"  wrong count or eos id: {len(got['ids'])} texts, eos {got['eos_id']}")
            failures += 1
        failures += len(bad) + len(not_round)

    # `moe4d prepare --tokenizer-model`: the shard holds the reference ids, document by document.
    corpus_dir = os.path.join(work, "corpus")
    os.makedirs(corpus_dir)
    docs = [t for t in texts[:40] if t.strip() and "\n%\n" not in t and t != "%"]
    with open(os.path.join(corpus_dir, "docs.txt"), "w", encoding="utf-8") as f:
        f.write("".join(d + "\n%\n" for d in docs))
    out_dir = os.path.join(work, "prepared")
    subprocess.run([moe4d, "prepare", "--input", corpus_dir, "--output", out_dir, "--doc-separator", "percent",
                    "--valid-fraction", "0", "--tokenizer-model", os.path.join(work, "qwen2.tokenizer.json")],
                   check=True, stdout=subprocess.DEVNULL)
    ref = Reference(json.load(open(os.path.join(work, "qwen2.tokenizer.json"), encoding="utf-8")))
    header = json.load(open(os.path.join(out_dir, "train.json")))
    width = 2 if header["dtype"] == "uint16" else 4
    raw = open(os.path.join(out_dir, "train.bin"), "rb").read()
    shard = [int.from_bytes(raw[i:i + width], "little") for i in range(0, len(raw), width)]
    eos = ref.added["<|endoftext|>"]
    # The percent reader keeps each document's text up to its separator line, final newline included.
    expected = []
    for d in docs:
        expected += ref.encode(d + "\n") + [eos]
    identity = header.get("tokenizer_identity", {})
    print(f"prepare: {len(shard)} ids in the shard, {len(expected)} expected; identity {identity.get('kind')}, "
          f"tokenizer {header['tokenizer']}")
    if shard != expected or identity.get("kind") != "huggingface" or header["tokenizer"] != "tokenizer.json":
        first = next((i for i, (a, b) in enumerate(zip(shard, expected)) if a != b), min(len(shard), len(expected)))
        print(f"  MISMATCH from id {first}: shard {shard[first:first + 10]} expected {expected[first:first + 10]}")
        failures += 1
    # train / eval / generate on those shards: the checkpoint carries the tokenizer.json, and
    # generate encodes its prompt as the reference does.
    with open(os.path.join(work, "run.yaml"), "w") as f:
        f.write(f"""model: {{vocab_size: {header['vocab_size'] + 3}, hidden_size: 16, num_layers: 2, num_heads: 4,
        ffn_hidden_size: 24, seq_length: 16, moe: {{num_experts: 4, top_k: 2}}}}
train: {{global_batch_size: 2, steps: 2, log_interval: 1}}
data: {{train: {out_dir}/train.bin}}
checkpoint: {{dir: {work}/ckpt, interval: 2}}
""")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    run = lambda *args: subprocess.run([moe4d, *args], check=True, capture_output=True, text=True, env=env)
    run("train", os.path.join(work, "run.yaml"))
    evaluated = run("eval", os.path.join(work, "ckpt"), "--data", os.path.join(out_dir, "train.bin")).stdout
    prompt = "<|im_start|>user\nThe café's 12 人工智能 😀<|im_end|>"
    generated = json.loads(run("generate", os.path.join(work, "ckpt"), "--prompt", prompt, "--tokens", "4",
                               "--json").stdout)
    print(f"train/eval/generate: {evaluated.strip().splitlines()[-1]}; prompt ids {generated['prompt_ids']}")
    if generated["prompt_ids"] != ref.encode(prompt) or len(generated["ids"]) == 0:
        print(f"  MISMATCH prompt ids: reference {ref.encode(prompt)}")
        failures += 1
    print("FAILED" if failures else "all equal")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
