#!/bin/bash
# File: tools/bench_compiled_out.sh
#
# All tracking off at run time vs the profiler compiled out: runs two
# bench_memory binaries, one from the default build and one from
# `--define=verl_profiler=off`, alternately (ABAB..., `runs` each) and prints
# the median "off (annotated)" step time of each (thread CPU time), the ratio
# of the medians and
# the median of the per-pair ratios. In the
# compiled-out binary those annotations are empty functions and no hook exists.
#
#   bazel build //tools:bench_memory && cp bazel-bin/tools/bench_memory /tmp/in
#   bazel build --define=verl_profiler=off //tools:bench_memory &&
#     cp bazel-bin/tools/bench_memory /tmp/out
#   tools/bench_compiled_out.sh /tmp/in /tmp/out 10 [bench_memory flags]
set -euo pipefail
in_bin=$1 out_bin=$2 runs=${3:-10}
shift 3 || true
flags=("--pairs=4" "$@")
# Thread CPU ms/step of the "off (annotated)" mode (not inflated by load).
step_ms() { "$1" "${flags[@]}" | awk '/^off \(annotated\)/ {print $6}'; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
: >/tmp/bench_co_in.txt
: >/tmp/bench_co_out.txt
for ((i = 0; i < runs; ++i)); do
  if ((i % 2 == 0)); then
    step_ms "$in_bin" >>/tmp/bench_co_in.txt
    step_ms "$out_bin" >>/tmp/bench_co_out.txt
  else
    step_ms "$out_bin" >>/tmp/bench_co_out.txt
    step_ms "$in_bin" >>/tmp/bench_co_in.txt
  fi
done
m_in=$(median </tmp/bench_co_in.txt)
m_out=$(median </tmp/bench_co_out.txt)
echo "compiled in, tracking off: ${m_in} CPU ms/step (median of ${runs} runs)"
echo "compiled out:              ${m_out} CPU ms/step (median of ${runs} runs)"
awk -v a="$m_in" -v b="$m_out" \
  'BEGIN {printf "compiled in (off) / compiled out: %.4f (medians; target ~1.00)\n", a / b}'
m_pair=$(paste /tmp/bench_co_in.txt /tmp/bench_co_out.txt | awk '{print $1 / $2}' | median)
echo "median of per-pair ratios:        ${m_pair}"
