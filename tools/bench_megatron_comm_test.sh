#!/bin/bash
# File: tools/bench_megatron_comm_test.sh
#
# //tools:bench_megatron_comm at tp 2 x dp 2 and at tp 2 x pp 2 (4
# processes each, one short step of tiny-qwen2), and tiny-qwen3-moe at dp 4
# = etp 2 x ep 2 (4 processes): every group's measured bytes must equal the
# analytic count (the tool exits 2 otherwise), and the tables name the tp,
# dp, pp, ep and etp collectives and the cp / pp groups.
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
pp_out="$TEST_TMPDIR/bench_pp.txt"
tools/bench_megatron_comm --tps=2 --dp=1 --pp=2 --steps=1 --seqs=4 \
  --seq_len=32 | tee "$pp_out"
grep -q "measured bytes equal Megatron's count" "$pp_out"
for row in "pp send" "pp recv" "pp all_reduce" "tp all_gather"; do
  grep -Eq "^ +1 +${row% *} ${row#* } " "$pp_out" ||
    { echo "no row '$row'"; exit 1; }
done
# Expert parallelism: tiny-qwen3-moe at dp 4 = etp 2 x ep 2 with capacity
# dropping; the ep all-to-all and the etp all-gather / all-to-all bytes
# equal the count from the step's routing.
moe_out="$TEST_TMPDIR/bench_moe.txt"
tools/bench_megatron_comm --model=tiny-qwen3-moe --tps=1 --dp=4 --ep=2 \
  --etp=2 --steps=1 --seqs=2 --seq_len=32 --capacity_factor=1.0 |
  tee "$moe_out"
grep -q "measured bytes equal Megatron's count" "$moe_out"
for row in "ep all_to_all" "etp all_gather" "etp all_to_all" \
  "etp_ep all_reduce" "dp all_reduce"; do
  grep -Eq "^ +1 +${row% *} ${row#* } " "$moe_out" ||
    { echo "no row '$row'"; exit 1; }
done
grep -q "a2a ms/layer" "$moe_out"
