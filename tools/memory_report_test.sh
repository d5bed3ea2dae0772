#!/bin/bash
# memory_report on a PyTorch-layout snapshot written by Python's pickle: the
# peak over the trace window, its phase and the sites by bytes.
set -euo pipefail
BIN="$(dirname "$0")/memory_report"
[[ -x "$BIN" ]] || BIN="tools/memory_report"
DIR="${TEST_TMPDIR:-$(mktemp -d)}"
python3 - "$DIR/snap.pickle" <<'PY'
import pickle, sys
f_user = {'filename': '/src/train.py', 'line': 12, 'name': 'forward'}
f_opt = {'filename': '/src/optim.py', 'line': 40, 'name': 'step'}
f_alloc = {'filename': '/usr/lib/libc10.so', 'line': 0, 'name': 'c10::alloc_cpu'}
blk = lambda size, addr, fr: {'size': size, 'requested_size': size,
    'address': addr, 'state': 'active_allocated', 'frames': fr}
snap = {
  'segments': [
    {'address': 4096, 'total_size': 3000, 'stream': 0, 'segment_type': 'small',
     'allocated_size': 3000, 'active_size': 3000,
     'blocks': [blk(1000, 4096, [f_alloc, f_user]), blk(2000, 5096, [f_opt]),
                {'size': 500, 'requested_size': 500, 'address': 7096,
                 'state': 'inactive', 'frames': []}]}],
  'device_traces': [[
    {'action': 'alloc', 'addr': 4096, 'size': 1000, 'stream': 0, 'frames': [f_alloc, f_user]},
    {'action': 'alloc', 'addr': 9000, 'size': 7000, 'stream': 0, 'frames': [f_user], 'phase': 'gen'},
    {'action': 'free_requested', 'addr': 9000, 'size': 7000, 'stream': 0, 'frames': []},
    {'action': 'free_completed', 'addr': 9000, 'size': 7000, 'stream': 0, 'frames': []},
    {'action': 'alloc', 'addr': 5096, 'size': 2000, 'stream': 0, 'frames': [f_opt]},
  ]],
}
open(sys.argv[1], 'wb').write(pickle.dumps(snap, protocol=4))
PY
OUT="$("$BIN" --top=3 "$DIR/snap.pickle")"
echo "$OUT"
grep -q "live: 0.003 MiB (3000 bytes) in 2 blocks" <<<"$OUT"
grep -q "peak: 0.008 MiB (8000 bytes) in phase gen (traced window)" <<<"$OUT"
grep -Eq "^ +8000 bytes +2 x  forward \(train.py:12\)$" <<<"$OUT"
grep -Eq "^ +2000 bytes +1 x  step \(optim.py:40\)$" <<<"$OUT"
# Bad input: one clear line naming the file, non-zero exit.
printf 'junk' >"$DIR/bad.pickle"
if "$BIN" "$DIR/bad.pickle" 2>"$DIR/err"; then exit 1; fi
grep -q "bad.pickle" "$DIR/err"
echo PASS
