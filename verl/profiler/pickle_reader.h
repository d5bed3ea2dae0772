// File: verl/profiler/pickle_reader.h
//
// Forwarding header: memory snapshots are read with the generic restricted
// unpickler in verl/core/pickle.h. Kept only until verl/rl and
// tools/memory_report move to it.
#ifndef VERL_PROFILER_PICKLE_READER_H_
#define VERL_PROFILER_PICKLE_READER_H_

#include "verl/core/pickle.h"

namespace verl::profiler {

using core::ReadPickle;
using core::ReadPickleFile;

}  // namespace verl::profiler

#endif  // VERL_PROFILER_PICKLE_READER_H_
