// File: verl/models/testing/graph_testutil.cc
#include "verl/models/testing/graph_testutil.h"

#include <torch/csrc/autograd/function.h>

#include <set>
#include <vector>

namespace verl::models::testing {

int CountGraphNodes(const at::Tensor& t, const std::string& name) {
  std::vector<torch::autograd::Node*> stack;
  std::set<torch::autograd::Node*> seen;
  if (t.grad_fn()) stack.push_back(t.grad_fn().get());
  int count = 0;
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (!seen.insert(node).second) continue;
    count += node->name() == name;
    for (const auto& edge : node->next_edges()) {
      if (edge.function) stack.push_back(edge.function.get());
    }
  }
  return count;
}

}  // namespace verl::models::testing
