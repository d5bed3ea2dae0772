#!/bin/bash
# File: tools/bench_megatron_comm_test.sh
#
# //tools:bench_megatron_comm at tp 2 x dp 2 (4 processes, one short step of
# tiny-qwen2): every group's measured bytes must equal the analytic count
# (the tool exits 2 otherwise), and the table names the tp and dp
# collectives and the cp / pp groups.
set -euo pipefail
out="$TEST_TMPDIR/bench.txt"
tools/bench_megatron_comm --tps=2 --dp=2 --steps=1 --seqs=2 --seq_len=32 \
  | tee "$out"
grep -q "measured bytes equal Megatron's count" "$out"
for row in "tp all_gather" "tp reduce_scatter" "tp all_reduce" \
  "dp all_gather" "dp reduce_scatter"; do
  grep -Eq "^ +1 +${row% *} ${row#* } " "$out" ||
    { echo "no row '$row'"; exit 1; }
done
grep -q "cp size 1" "$out"
grep -q "pp size 1" "$out"
