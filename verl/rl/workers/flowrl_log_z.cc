// File: verl/rl/workers/flowrl_log_z.cc
#include "verl/rl/workers/flowrl_log_z.h"

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <vector>

#include "verl/core/status.h"

namespace verl::rl {

LogZHeadImpl::LogZHeadImpl(int64_t hidden_size, int64_t num_layers,
                           double dropout) {
  net_ = register_module("net", torch::nn::Sequential());
  for (int64_t i = 0; i + 1 < num_layers; ++i) {
    net_->push_back(torch::nn::Linear(hidden_size, hidden_size));
    net_->push_back(torch::nn::GELU());
    net_->push_back(
        torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden_size})));
    net_->push_back(torch::nn::Dropout(dropout));
  }
  net_->push_back(torch::nn::Linear(hidden_size, 1));
}

at::Tensor LogZHeadImpl::forward(const at::Tensor& prompt_hidden) {
  // The head's own dtype (fp32 unless converted), whatever the model's is.
  const at::ScalarType dtype = parameters().front().scalar_type();
  at::Tensor x = prompt_hidden.to(dtype);
  for (torch::nn::AnyModule& m : *net_) {
    const auto* drop = m.ptr()->as<torch::nn::DropoutImpl>();
    const double p = drop ? drop->options.p() : 0.0;
    if (drop && dropout_generator_ && drop->is_training() && p > 0) {
      // torch's dropout, with the masks from our generator.
      x = x * at::empty_like(x).bernoulli_(1.0 - p, *dropout_generator_) /
          (1.0 - p);
    } else {
      x = m.forward(x);
    }
  }
  return x.squeeze(-1);
}

void JointTrainState::ZeroGrad() {
  policy_.ZeroGrad();
  head_.ZeroGrad();
}

absl::StatusOr<double> JointTrainState::Step() {
  VERL_ASSIGN_OR_RETURN(double norm, policy_.Step());
  VERL_ASSIGN_OR_RETURN(head_grad_norm_, head_.Step());
  return norm;
}

}  // namespace verl::rl
