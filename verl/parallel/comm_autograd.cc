// File: verl/parallel/comm_autograd.cc
#include "verl/parallel/comm_autograd.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/zeros.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <utility>
#include <vector>

namespace verl::parallel {
namespace {

using torch::autograd::variable_list;

class CommBackward : public torch::autograd::Node {
 public:
  CommBackward(std::string name, CommBackwardFn backward, const at::Tensor& out)
      : name_(std::move(name)),
        backward_(std::move(backward)),
        out_sizes_(out.sizes().vec()),
        out_options_(out.options()) {}
  std::string name() const override { return name_; }
  variable_list apply(variable_list&& grads) override {
    at::Tensor g =
        grads[0].defined() ? grads[0] : at::zeros(out_sizes_, out_options_);
    return {backward_(g)};
  }

 private:
  std::string name_;
  CommBackwardFn backward_;
  std::vector<int64_t> out_sizes_;
  at::TensorOptions out_options_;
};

}  // namespace

void DieOnCommError(const absl::Status& status, const Communicator& comm,
                    const std::string& what) {
  if (status.ok()) return;
  LOG(FATAL) << what << " (rank " << comm.global_rank() << ", group '"
             << comm.name() << "'): " << status;
}

at::Tensor CommOrDie(absl::StatusOr<at::Tensor> t, const Communicator& comm,
                     const std::string& what) {
  DieOnCommError(t.status(), comm, what);
  return *std::move(t);
}

at::Tensor WithCommBackward(at::Tensor out, const at::Tensor& in,
                            std::string name, CommBackwardFn backward) {
  if (!at::GradMode::is_enabled() || !in.requires_grad()) return out;
  auto node = std::shared_ptr<CommBackward>(
      new CommBackward(std::move(name), std::move(backward), out),
      torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(in));
  torch::autograd::set_history(out, node);
  return out;
}

}  // namespace verl::parallel
