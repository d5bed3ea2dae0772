// File: verl/models/flops_dims.h
//
// A decoder's dimensions as verl's FLOPs counter takes them
// (verl/profiler/flops_counter.h): the MFU of a training step or benchmark.
#ifndef VERL_MODELS_FLOPS_DIMS_H_
#define VERL_MODELS_FLOPS_DIMS_H_

#include "verl/models/model_config.h"
#include "verl/profiler/flops_counter.h"

namespace verl::models {

// verl's FLOPs dimensions of a decoder (MoE layers counted by HF's rule).
profiler::FlopsModelDims FlopsDims(const ModelConfig& config);

}  // namespace verl::models

#endif  // VERL_MODELS_FLOPS_DIMS_H_
