// File: verl/core/malloc_tuning.cc
#include "verl/core/malloc_tuning.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace verl::core {

void ReexecWithHeapRetainingMalloc(char** argv) {
  if (std::getenv("GLIBC_TUNABLES") != nullptr) return;
  const char* opt_out = std::getenv("VERL_MALLOC_TUNING");
  if (opt_out != nullptr && std::strcmp(opt_out, "0") == 0) return;
  if (setenv("GLIBC_TUNABLES", kHeapRetainingTunables, /*overwrite=*/0) != 0) {
    return;
  }
  execv("/proc/self/exe", argv);
  // Only reached if the exec failed: run on with glibc's defaults.
  unsetenv("GLIBC_TUNABLES");
}

}  // namespace verl::core
