// File: verl/infer/cpu_isa.h
//
// The engine's name for the run-time ISA choice, which lives in
// verl/core/cpu_isa.h (shared with the training ops of verl/models).
#ifndef VERL_INFER_CPU_ISA_H_
#define VERL_INFER_CPU_ISA_H_

#include "verl/core/cpu_isa.h"

namespace verl::infer {

using core::ActiveCpuIsa;
using core::CpuIsa;
using core::CpuIsaName;
using core::CpuSupports;
using core::DetectCpuIsa;

}  // namespace verl::infer

#endif  // VERL_INFER_CPU_ISA_H_
