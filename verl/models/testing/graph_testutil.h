// File: verl/models/testing/graph_testutil.h
//
// Test helper: inspects the autograd graph behind a tensor, e.g. how many
// layers gradient checkpointing wraps (recompute.h's "CheckpointBackward").
#ifndef VERL_MODELS_TESTING_GRAPH_TESTUTIL_H_
#define VERL_MODELS_TESTING_GRAPH_TESTUTIL_H_

#include <ATen/core/Tensor.h>

#include <string>

namespace verl::models::testing {

// Autograd nodes named `name` in the graph behind `t` (each counted once).
int CountGraphNodes(const at::Tensor& t, const std::string& name);

}  // namespace verl::models::testing

#endif  // VERL_MODELS_TESTING_GRAPH_TESTUTIL_H_
