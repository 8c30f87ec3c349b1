#!/usr/bin/env bash
# scripts/setup.sh — install what moe4d needs from Debian 12's apt (only what is missing), then
# configure and build it. Usage: scripts/setup.sh [target...]   (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."

# libdnnl-dev's CMake config (dnnl-config.cmake) calls find_package(OpenCL REQUIRED), so the OpenCL
# ICD loader and headers are build dependencies even though moe4d runs oneDNN on the CPU only.
# python3-torch/-numpy/-protobuf and protobuf-compiler are for the tests' independent references;
# clang and its runtimes build the fuzzers and the sanitizer build; the xz and zstd command-line
# tools compress the tests' corpora independently of moe4d's decoders.
packages=(g++ cmake ninja-build pkg-config git ca-certificates
          libopenmpi-dev openmpi-bin libopenblas-dev libdnnl-dev ocl-icd-opencl-dev opencl-c-headers
          libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libsentencepiece-dev
          zlib1g-dev liblzma-dev libzstd-dev libgtest-dev libgmock-dev libssl-dev fortunes
          clang libclang-rt-14-dev xz-utils zstd
          python3 python3-numpy python3-torch python3-protobuf protobuf-compiler)
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

# Put `moe4d` on PATH: /usr/local/bin when that is writable (root), else ~/.local/bin
# (MOE4D_PREFIX overrides). The tests and scripts use build/src/moe4d, the binary just built.
prefix="${MOE4D_PREFIX:-/usr/local}"
[ -n "${MOE4D_PREFIX:-}" ] || [ -w "$prefix/bin" ] || prefix="$HOME/.local"
cmake --install build --prefix "$prefix" > /dev/null
case ":$PATH:" in
  *":$prefix/bin:"*) echo "== installed $prefix/bin/moe4d" ;;
  *) echo "== installed $prefix/bin/moe4d (add $prefix/bin to PATH to call it as moe4d)" ;;
esac
