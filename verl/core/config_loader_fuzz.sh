#!/usr/bin/env bash
# File: verl/core/config_loader_fuzz.sh
#
# Builds and runs the config-parser libFuzzer target (config_loader_fuzz.cc)
# under ASan + UBSan with clang (Bazel's toolchain here is gcc, which has no
# libFuzzer). Needs clang-14 and libfuzzer-14-dev.
# Usage: verl/core/config_loader_fuzz.sh [seconds=60] [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs="${1:-60}"
shift || true
out="${TMPDIR:-/tmp}/verl_config_fuzz"
mkdir -p "$out/gen" "$out/obj" "$out/corpus"
protoc --cpp_out="$out/gen" verl/core/config_loader_test.proto
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer
       -fsanitize=address,undefined,fuzzer-no-link -I. -I"$out/gen")
for src in verl/core/config_loader_fuzz.cc verl/core/config_loader.cc \
           verl/core/status.cc "$out/gen/verl/core/config_loader_test.pb.cc"; do
  clang++ "${flags[@]}" -c "$src" -o "$out/obj/$(basename "$src" .cc).o"
done
clang++ -fsanitize=address,undefined "$out"/obj/*.o \
  /usr/lib/llvm-14/lib/libFuzzer.a -o "$out/config_loader_fuzz" \
  -lprotobuf -lglog -lgflags \
  $(ls /usr/lib/x86_64-linux-gnu/libabsl_*.so | sed 's|.*/lib\(absl_[a-z0-9_]*\)\.so|-l\1|') \
  -lpthread
# Seed: a text proto, a NUL, then overrides (the input format of the entry).
printf 'title: "t"\nids: [1, 2]\ninner {\n  rate: 0.25\n  color: blue\n  tags: ["a"]\n  extra { key: "k" value: "v" }\n}\n#@null other\n\0size=3\ninner.tags=[x,y]\ninner.extra.q=1\n~inner.steps' \
  > "$out/corpus/seed"
ASAN_OPTIONS=detect_leaks=0 "$out/config_loader_fuzz" -max_total_time="$secs" \
  -max_len=2048 "$@" "$out/corpus"
