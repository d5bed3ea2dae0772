// File: verl/models/recompute.cc
#include "verl/models/recompute.h"

#include <ATen/core/grad_mode.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <memory>
#include <string>
#include <utility>

namespace verl::models {
namespace {

using torch::autograd::variable_list;

// Backward: re-run fn from the saved inputs with grad on, then
// d(outputs)/d(inputs, params) against the incoming gradients.
class CheckpointBackward : public torch::autograd::Node {
 public:
  CheckpointBackward(RecomputeFn fn, TensorList inputs, TensorList params)
      : fn_(std::move(fn)),
        inputs_(std::move(inputs)),
        params_(std::move(params)) {}

  std::string name() const override { return "CheckpointBackward"; }

  variable_list apply(variable_list&& grads) override {
    CHECK(fn_) << "checkpointed function backward run twice";
    at::AutoGradMode grad_on(true);
    TensorList xs;
    variable_list wrt;
    for (const at::Tensor& in : inputs_) {
      const bool rg = in.defined() && in.requires_grad();
      at::Tensor x = in.defined() ? in.detach().requires_grad_(rg) : in;
      xs.push_back(x);
      if (rg) wrt.push_back(x);
    }
    const size_t num_inputs_wrt = wrt.size();
    for (const at::Tensor& p : params_) wrt.push_back(p);
    TensorList outs = fn_(xs);
    variable_list used_outs, used_grads;
    for (size_t i = 0; i < outs.size() && i < grads.size(); ++i) {
      if (grads[i].defined() && outs[i].defined() && outs[i].requires_grad()) {
        used_outs.push_back(outs[i]);
        used_grads.push_back(grads[i]);
      }
    }
    variable_list result(inputs_.size() + params_.size());
    if (!used_outs.empty()) {
      variable_list g = torch::autograd::grad(used_outs, wrt, used_grads,
                                              /*retain_graph=*/false,
                                              /*create_graph=*/false,
                                              /*allow_unused=*/true);
      size_t k = 0;
      for (size_t i = 0; i < inputs_.size(); ++i) {
        if (inputs_[i].defined() && inputs_[i].requires_grad()) {
          result[i] = g[k++];
        }
      }
      CHECK_EQ(k, num_inputs_wrt);
      for (size_t i = 0; i < params_.size(); ++i) {
        result[inputs_.size() + i] = g[k++];
      }
    }
    release_variables();
    return result;
  }

  void release_variables() override {
    fn_ = nullptr;
    inputs_.clear();
    params_.clear();
  }

 private:
  RecomputeFn fn_;
  TensorList inputs_;
  TensorList params_;
};

}  // namespace

TensorList Checkpoint(const RecomputeFn& fn, const TensorList& inputs,
                      const TensorList& all_params) {
  TensorList params;
  for (const at::Tensor& p : all_params) {
    if (p.requires_grad()) params.push_back(p);
  }
  bool any_input = false;
  for (const at::Tensor& x : inputs) {
    any_input = any_input || (x.defined() && x.requires_grad());
  }
  if (!at::GradMode::is_enabled() || (!any_input && params.empty())) {
    return fn(inputs);
  }
  TensorList outs;
  {
    at::NoGradGuard no_grad;
    outs = fn(inputs);
  }
  auto node = std::shared_ptr<CheckpointBackward>(
      new CheckpointBackward(fn, inputs, params), torch::autograd::deleteNode);
  variable_list edges_of(inputs.begin(), inputs.end());
  node->set_next_edges(torch::autograd::collect_next_edges(edges_of, params));
  for (at::Tensor& out : outs) {
    if (out.defined()) {
      torch::autograd::set_history(out, node);
    } else {
      node->add_input_metadata(torch::autograd::Node::undefined_input());
    }
  }
  return outs;
}

}  // namespace verl::models
