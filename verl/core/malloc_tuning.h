// File: verl/core/malloc_tuning.h
//
// glibc returns every freed block above its mmap threshold (128 KiB, rising
// to at most 32 MiB) to the OS, so a training step that frees and reallocates
// its activations and gradients page-faults them in again every step: on a VM
// that is half of an fp32 training step (docs/training.md). The thresholds
// that keep such blocks in the heap can only be given to glibc before the
// process starts (GLIBC_TUNABLES; mallopt caps the mmap threshold at 32 MiB),
// so a binary's main re-executes itself once with them.
#ifndef VERL_CORE_MALLOC_TUNING_H_
#define VERL_CORE_MALLOC_TUNING_H_

namespace verl::core {

// The GLIBC_TUNABLES value set by ReexecWithHeapRetainingMalloc.
inline constexpr char kHeapRetainingTunables[] =
    "glibc.malloc.mmap_threshold=4294967295:"
    "glibc.malloc.trim_threshold=4294967295";

// Call first thing in main. Unless GLIBC_TUNABLES is already set (the user's
// value wins) or VERL_MALLOC_TUNING=0, sets it to kHeapRetainingTunables and
// execv's /proc/self/exe with the same argv; returns only when it did not
// re-execute (or the exec failed: the run goes on with glibc's defaults).
// The process then keeps its peak heap instead of returning it between steps.
void ReexecWithHeapRetainingMalloc(char** argv);

}  // namespace verl::core

#endif  // VERL_CORE_MALLOC_TUNING_H_
