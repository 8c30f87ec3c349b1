#!/usr/bin/env bash
# scripts/demo.sh — the moe4d demo on one machine: installs and builds what is missing, prepares the
# fortunes corpus (Debian's `fortunes` package) with a BPE tokenizer, trains a tiny MoE with
# data x expert x tensor parallelism over 8 local MPI ranks, draws the run, and samples text.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh moe4d

if [ ! -f data/fortunes/train.json ]; then
  echo "== preparing the corpus (data/fortunes)"
  build/src/moe4d prepare --output data/fortunes --tokenizer bpe --vocab-size 4096
fi

if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
export OPENBLAS_NUM_THREADS=1
rm -rf runs/demo
echo "== training configs/demo.yaml on 8 MPI ranks (dp 2 x ep 2 x tp 2)"
mpirun -np 8 --oversubscribe --bind-to none build/src/moe4d train configs/demo.yaml

echo "== a sample from the trained model"
build/src/moe4d generate runs/demo --prompt "The" --tokens 60 --temperature 0.8 --seed 1
