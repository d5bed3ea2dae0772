#!/bin/bash
# tools/blis_arch.py (the Python benchmarks' copy of verl/core/blis_arch.h's
# rule) on planted /proc/cpuinfo blocks: skx only for AMD families >= 0x1A
# with AVX-512 F/DQ/BW/VL; the first processor's block decides.
set -euo pipefail
cd "$(dirname "$0")"
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
avx512="fpu avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl"
check() {  # vendor family flags want
  printf 'processor\t: 0\nvendor_id\t: %s\ncpu family\t: %s\nflags\t\t: %s\n\n' \
    "$1" "$2" "$3" > "$TMP/cpuinfo"
  # A second block that would give another answer: must be ignored.
  printf 'processor\t: 1\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nflags\t\t: %s\n' \
    "$avx512" >> "$TMP/cpuinfo"
  got=$(python3 -c 'import sys, blis_arch; print(blis_arch.blis_arch_override(sys.argv[1]))' "$TMP/cpuinfo")
  if [ "$got" != "$4" ]; then
    echo "FAIL: $1 family $2 -> '$got', want '$4'"; exit 1
  fi
}
check AuthenticAMD 26 "$avx512" skx
check AuthenticAMD 27 "$avx512" skx
check AuthenticAMD 26 "fpu avx2 fma avx512f" ""   # no DQ/BW/VL
check AuthenticAMD 25 "$avx512" ""                # Zen 4: BLIS picks zen3
check GenuineIntel 6 "$avx512" ""
check HygonGenuine 24 "fpu avx2 fma" ""
check AuthenticAMD "" "$avx512" ""                # unreadable family
echo PASS
