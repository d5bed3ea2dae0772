// File: verl/core/heap_counter.h
//
// Counts heap allocations for tests that assert a loop does not allocate
// (the rollout engine's steady decode step). Linking this library replaces
// the process's malloc, calloc, realloc, posix_memalign, aligned_alloc,
// memalign, valloc and pvalloc with thin wrappers around glibc's
// (__libc_*); operator new and LibTorch's CPU allocator go through them.
// While a HeapCounter is alive every allocation on any thread is counted.
// Test-only (testonly target): the wrappers cost an atomic load per call.
#ifndef VERL_CORE_HEAP_COUNTER_H_
#define VERL_CORE_HEAP_COUNTER_H_

#include <cstdint>

namespace verl::core::testing {

class HeapCounter {
 public:
  // Starts counting from zero. One counter at a time.
  // `print_stacks`: also write each counted allocation's call stack to
  // stderr (backtrace_symbols_fd), to find where a loop allocates.
  explicit HeapCounter(bool print_stacks = false);
  ~HeapCounter();
  HeapCounter(const HeapCounter&) = delete;
  HeapCounter& operator=(const HeapCounter&) = delete;

  // False in builds whose sanitizer owns malloc (--config=asan): nothing is
  // interposed there and the counts stay 0, so tests skip.
  static bool Available();

  // Allocations so far (realloc counts as one) and their requested bytes.
  int64_t allocations() const;
  int64_t bytes() const;
};

}  // namespace verl::core::testing

#endif  // VERL_CORE_HEAP_COUNTER_H_
