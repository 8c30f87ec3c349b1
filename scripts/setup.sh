#!/usr/bin/env bash
# scripts/setup.sh — install what moe4d needs from Debian 12's apt (only what is missing), then
# configure and build it. Usage: scripts/setup.sh [target...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ cmake ninja-build pkg-config git
          libopenmpi-dev openmpi-bin libopenblas-dev libdnnl-dev libyaml-cpp-dev nlohmann-json3-dev
          libcli11-dev libfmt-dev libsentencepiece-dev libgtest-dev libgmock-dev libssl-dev fortunes zlib1g-dev protobuf-compiler python3-protobuf)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

echo "== building moe4d (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j "$(nproc)" ${1:+--target "$@"}
