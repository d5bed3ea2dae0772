// File: verl/parallel/comm_autograd.h
//
// Building blocks for differentiable collectives (Ulysses' all-to-alls,
// Megatron's tensor/sequence-parallel mappings): an autograd node whose
// backward is another collective, and the fatal-error path for a collective
// that fails inside forward/backward (a Status cannot cross autograd; the
// launcher stops the other ranks when one exits).
//
//   at::Tensor out;
//   { at::NoGradGuard g; out = AllReduced(x.detach()); }
//   return WithCommBackward(out, x, "MyBackward",
//                           [](const at::Tensor& g) { return g; });
#ifndef VERL_PARALLEL_COMM_AUTOGRAD_H_
#define VERL_PARALLEL_COMM_AUTOGRAD_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verl/parallel/process_group.h"

namespace verl::parallel {

// Ends the process with a line naming `what`, this rank and the group.
void DieOnCommError(const absl::Status& status, const Communicator& comm,
                    const std::string& what);
at::Tensor CommOrDie(absl::StatusOr<at::Tensor> t, const Communicator& comm,
                     const std::string& what);

// Gives `out` (computed without history from `in`) an autograd node whose
// backward maps the output gradient through `backward` into `in`'s gradient.
// An undefined incoming gradient becomes zeros of the output's shape, so
// every rank still takes part in the backward collective. No-op when grad
// mode is off or `in` does not require grad.
using CommBackwardFn = std::function<at::Tensor(const at::Tensor&)>;
at::Tensor WithCommBackward(at::Tensor out, const at::Tensor& in,
                            std::string name, CommBackwardFn backward);

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_COMM_AUTOGRAD_H_
