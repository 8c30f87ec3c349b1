#!/usr/bin/env python3
"""How many times each config key's name is spelled as a string literal in src/ (issue #31's count).

Usage: scripts/count_config_key_spellings.py [REV]   (default: the working tree)

The keys are the rows of the working tree's docs/config.md tables (as tests/config/config_doc_test.cc
reads them), counted in REV's sources. Two counts per key:
  config: string literals in src/config/ that are the key's name ("top_k"), its full path
          ("model.moe.top_k") or a path ending in it ("moe.top_k");
  src:    string literals anywhere in src/ that are its full path or a dotted path ending in it (a bare
          name such as "format" or "train" is too common outside the config to count there).
Prints the keys spelled more than once in src/config/, then the totals (and how many of the
src/config/ spellings are in the key table, src/config/config_keys.cc, where each key has its row).
"""
import re
import subprocess
import sys

rev = sys.argv[1] if len(sys.argv) > 1 else None


def read(path):
    if rev is None:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    return subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, errors="replace").stdout


def files():
    if rev is None:
        out = subprocess.run(["git", "ls-files", "src"], capture_output=True, text=True).stdout
    else:
        out = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "src"], capture_output=True, text=True).stdout
    return [f for f in out.split() if f.endswith((".cc", ".h"))]


keys = []
section = ""
with open("docs/config.md", encoding="utf-8") as doc:
    doc_lines = doc.read().splitlines()
for line in doc_lines:
    if line.startswith("## "):
        section = line[3:].split()[0]
        continue
    if not line.startswith("| ") or line.startswith("| key"):
        continue
    for name in line[2:line.index("|", 2)].split(","):
        name = name.strip(" `")
        m = re.match(r"(\S+) \(alias (\w+)", name)
        if m:
            keys.append(f"{section}.{m.group(2)}")
            name = m.group(1)
        keys.append(f"{section}.{name}")

config_literals, src_literals, table_literals = [], [], []
for path in files():
    code = re.sub(r"^\s*//.*$", "", read(path), flags=re.M)  # comment lines are not spellings
    found = re.findall(r'"((?:[^"\\\n]|\\.)*)"', code)
    src_literals += found
    if path.startswith("src/config/"):
        config_literals += found
    if path == "src/config/config_keys.cc":
        table_literals += found


def spells(lit, key, bare):
    leaf = key.split(".")[-1]
    return (bare and lit == leaf) or lit == key or ("." + leaf in lit and key.endswith(lit))


totals = [0, 0, 0]
once = 0
for key in keys:
    n_config = sum(spells(lit, key, True) for lit in config_literals)
    n_src = sum(spells(lit, key, False) for lit in src_literals)
    totals[0] += n_config
    totals[1] += n_src
    totals[2] += sum(spells(lit, key, True) for lit in table_literals)
    once += n_config == 1
    if n_config > 1:
        print(f"{n_config:3d} {key}")
print(f"{len(keys)} keys: {totals[0]} spellings in src/config/ ({totals[0] / len(keys):.2f} a key; {once} keys "
      f"spelled once; {totals[2]} of them in the key table config_keys.cc), {totals[1]} full-path spellings in src/")
