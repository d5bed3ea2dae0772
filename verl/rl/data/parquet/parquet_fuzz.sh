#!/usr/bin/env bash
# Builds and runs the Parquet reader's libFuzzer target under ASan + UBSan
# with clang (Bazel's toolchain here is gcc, which has no libFuzzer).
# Needs: clang-14 and libfuzzer-14-dev (apt-get install clang libfuzzer-14-dev).
# Usage: verl/rl/data/parquet/parquet_fuzz.sh [seconds=60] [extra libFuzzer flags...]
set -euo pipefail
cd "$(dirname "$0")/../../../.."
secs="${1:-60}"
shift || true
out="${TMPDIR:-/tmp}/verl_parquet_fuzz"
mkdir -p "$out/obj" "$out/corpus"
flags=(-std=c++17 -O1 -g -fno-omit-frame-pointer
       -fsanitize=address,undefined,fuzzer-no-link -I.)
for src in verl/rl/data/parquet/*.cc verl/core/file_util.cc; do
  case "$src" in *_test.cc|*test_util.cc) continue ;; esac
  obj="$out/obj/$(basename "$src" .cc).o"
  if [[ ! -f "$obj" || "$src" -nt "$obj" ]]; then
    clang++ "${flags[@]}" -c "$src" -o "$obj"
  fi
done
clang++ -fsanitize=address,undefined "$out"/obj/*.o /usr/lib/llvm-14/lib/libFuzzer.a \
  -o "$out/parquet_fuzz" -lsnappy -lzstd -lz -lbrotlidec -lglog -lgflags \
  $(ls /usr/lib/x86_64-linux-gnu/libabsl_*.so | sed 's|.*/lib\(absl_[a-z0-9_]*\)\.so|-l\1|') \
  -lpthread
# Seed corpus: the independent fixtures.
cp verl/rl/data/parquet/testdata/*.parquet "$out/corpus/"
ASAN_OPTIONS=detect_leaks=0 "$out/parquet_fuzz" -max_total_time="$secs" \
  -max_len=16384 -rss_limit_mb=4096 "$@" "$out/corpus"
