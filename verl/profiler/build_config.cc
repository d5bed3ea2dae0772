// File: verl/profiler/build_config.cc
#include "verl/profiler/build_config.h"

namespace verl::profiler {

bool ProfilerCompiledIn() {
#ifdef VERL_PROFILER_DISABLED
  return false;
#else
  return true;
#endif
}

}  // namespace verl::profiler
