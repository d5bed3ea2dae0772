// File: verl/core/heap_counter.cc
#include "verl/core/heap_counter.h"

#include <execinfo.h>
#include <glog/logging.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void* __libc_valloc(size_t size);
void* __libc_pvalloc(size_t size);
}

namespace verl::core::testing {
namespace {

std::atomic<bool> counting{false};
std::atomic<bool> print_stacks{false};
std::atomic<int64_t> g_allocations{0};
std::atomic<int64_t> g_bytes{0};
thread_local bool in_hook = false;  // backtrace may allocate

void Count(size_t size) {
  if (!counting.load(std::memory_order_relaxed)) return;
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  g_bytes.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed);
  if (!print_stacks.load(std::memory_order_relaxed) || in_hook) return;
  in_hook = true;
  void* frames[32];
  const int n = backtrace(frames, 32);
  static const char kSep[] = "--- allocation\n";
  (void)!write(STDERR_FILENO, kSep, sizeof(kSep) - 1);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  in_hook = false;
}

}  // namespace

HeapCounter::HeapCounter(bool stacks) {
  CHECK(!counting.load()) << "one HeapCounter at a time";
  g_allocations.store(0);
  g_bytes.store(0);
  print_stacks.store(stacks);
  counting.store(true);
}

HeapCounter::~HeapCounter() {
  counting.store(false);
  print_stacks.store(false);
}

int64_t HeapCounter::allocations() const { return g_allocations.load(); }

int64_t HeapCounter::bytes() const { return g_bytes.load(); }

#if defined(__SANITIZE_ADDRESS__)
bool HeapCounter::Available() { return false; }
#else
bool HeapCounter::Available() { return true; }
#endif

}  // namespace verl::core::testing

// The interposed entry points: this executable's definitions take
// precedence over libc's for every library in the process. Not under
// AddressSanitizer, whose runtime replaces them itself.
#if !defined(__SANITIZE_ADDRESS__)
using verl::core::testing::Count;

extern "C" {

void* malloc(size_t size) {
  Count(size);
  return __libc_malloc(size);
}

void* calloc(size_t n, size_t size) {
  Count(n * size);
  return __libc_calloc(n, size);
}

void* realloc(void* p, size_t size) {
  Count(size);
  return __libc_realloc(p, size);
}

void* memalign(size_t alignment, size_t size) {
  Count(size);
  return __libc_memalign(alignment, size);
}

void* aligned_alloc(size_t alignment, size_t size) {
  Count(size);
  return __libc_memalign(alignment, size);
}

int posix_memalign(void** out, size_t alignment, size_t size) {
  if (alignment % sizeof(void*) != 0 || (alignment & (alignment - 1)) != 0) {
    return EINVAL;
  }
  Count(size);
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr && size != 0) return ENOMEM;
  *out = p;
  return 0;
}

void* valloc(size_t size) {
  Count(size);
  return __libc_valloc(size);
}

void* pvalloc(size_t size) {
  Count(size);
  return __libc_pvalloc(size);
}

}  // extern "C"
#endif  // !__SANITIZE_ADDRESS__
