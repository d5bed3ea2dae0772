#!/usr/bin/env bash
# Builds and runs the safetensors libFuzzer target under ASan + UBSan with
# clang (Bazel's toolchain here is gcc, which has no libFuzzer).
# Needs: clang-14 and libfuzzer-14-dev (apt-get install clang libfuzzer-14-dev).
# Usage: verl/ckpt/safetensors_fuzz.sh [seconds=60] [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-60}"
shift || true
out="${TMPDIR:-/tmp}/verl_safetensors_fuzz"
mkdir -p "$out/obj" "$out/corpus"
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer
       -fsanitize=address,undefined,fuzzer-no-link -I. -I/usr/include/torch/csrc/api/include)
for src in verl/ckpt/safetensors_fuzz.cc verl/ckpt/safetensors.cc \
           verl/ckpt/safetensors_header.cc verl/core/file_util.cc verl/core/status.cc; do
  obj="$out/obj/$(basename "$src" .cc).o"
  if [[ ! -f "$obj" || "$src" -nt "$obj" ]]; then
    clang++ "${flags[@]}" -c "$src" -o "$obj"
  fi
done
clang++ -fsanitize=address,undefined "$out"/obj/*.o /usr/lib/llvm-14/lib/libFuzzer.a \
  -o "$out/safetensors_fuzz" -ltorch -ltorch_cpu -lc10 -lglog -lgflags \
  $(ls /usr/lib/x86_64-linux-gnu/libabsl_*.so | sed 's|.*/lib\(absl_[a-z0-9_]*\)\.so|-l\1|') \
  -lpthread
# Seed corpus: the malformed table cannot be emitted from here, so start from
# a small valid file written by the fuzz entry's own round trip.
printf '\x40\x00\x00\x00\x00\x00\x00\x00{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}          \x00\x00\x80\x3f\x00\x00\x00\x40' \
  > "$out/corpus/seed.safetensors"
ASAN_OPTIONS=detect_leaks=0 "$out/safetensors_fuzz" -max_total_time="$secs" \
  -max_len=4096 "$@" "$out/corpus"
