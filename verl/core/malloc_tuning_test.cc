// File: verl/core/malloc_tuning_test.cc
//
// A plain main (not gtest's): the re-exec must happen before anything else.
// After it GLIBC_TUNABLES holds the heap-retaining thresholds, and a 64 MiB
// block freed and allocated again is not faulted in a second time (with
// glibc's defaults it is munmapped on free and every page faults again).
#include "verl/core/malloc_tuning.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

long MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Page faults of touching a fresh 64 MiB block (after one warm-up round).
long FaultsOfTouching64MiB() {
  constexpr size_t kBytes = size_t{64} << 20;
  for (int round = 0; round < 2; ++round) {
    const long before = MinorFaults();
    char* p = static_cast<char*>(std::malloc(kBytes));
    for (size_t i = 0; i < kBytes; i += 4096) p[i] = 1;
    std::free(p);
    if (round == 1) return MinorFaults() - before;
  }
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  (void)argc;
  verl::core::ReexecWithHeapRetainingMalloc(argv);
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables == nullptr ||
      std::strcmp(tunables, verl::core::kHeapRetainingTunables) != 0) {
    std::printf("FAIL: GLIBC_TUNABLES is '%s' after the re-exec\n",
                tunables ? tunables : "(unset)");
    return 1;
  }
  const long faults = FaultsOfTouching64MiB();
  std::printf("faults touching a reused 64 MiB block: %ld (fresh: 16384)\n",
              faults);
  if (faults > 1000) {
    std::printf("FAIL: the freed block went back to the OS\n");
    return 1;
  }
  std::printf("PASS\n");
  return 0;
}
