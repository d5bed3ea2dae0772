// File: verl/ckpt/checkpoint_pt.h
//
// PyTorch `.pt` files (zip archive + pickle, the format of torch.save) for
// checkpoint shards, written with LibTorch's pickler so Python's `torch.load`
// reads what we write. Tensor dicts are read with PtArchive (pt_archive.h),
// which also reads what `torch.save(model.state_dict())` writes (a
// collections.OrderedDict of plain tensors); the extra state with LibTorch's
// unpickler.
//
// Supported content: a dict str -> tensor (model shards), the optimizer and
// extra-state dicts below (nested dicts of str, int, float, tensors). Files
// holding other Python objects (e.g. DTensor pickles of FSDP2, which need
// torch.distributed classes) are errors naming the file and the class.
// Writes are atomic (temp + fsync + rename + folder fsync).
#ifndef VERL_CKPT_CHECKPOINT_PT_H_
#define VERL_CKPT_CHECKPOINT_PT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::ckpt {

using PtTensorDict = std::map<std::string, at::Tensor>;

// Writes `tensors` as a pickled dict {name: tensor}.
absl::Status SavePtTensorDict(const std::string& path,
                              const PtTensorDict& tensors);
// Reads a pickled dict of tensors. Errors name `path`: missing, truncated or
// corrupted (CRC) archives, and values that are not plain tensors.
absl::StatusOr<PtTensorDict> LoadPtTensorDict(const std::string& path);

// `optim_world_size_{W}_rank_{R}.pt`: one rank's AdamW state in
// torch.optim.Optimizer.state_dict()'s layout (what verl's FSDP checkpoint
// manager saves), so Python's `AdamW(...).load_state_dict(torch.load(f))`
// reads it:
//   {"state": {i: {"step": float32 0-d tensor, "exp_avg": chunk,
//                  "exp_avg_sq": chunk}, ...},
//    "param_groups": [{"lr", "betas": (b1, b2), "eps", "weight_decay",
//                      "amsgrad", "maximize", "foreach", "capturable",
//                      "differentiable", "fused", "decoupled_weight_decay",
//                      "initial_lr", "params": [0, 1, ...],
//                      "param_names": [HF name, ...]}]}
// i is the parameter's position in `params` (the optimizer's order);
// parameters without state (before their first step) have no entry.
// `param_names` (torch >= 2.6's named-parameter key) lets a reader map the
// indices back to names.
struct OptimizerGroup {
  std::vector<std::string> param_names;  // the optimizer's parameter order
  double lr = 0;                         // in effect (after the last step)
  double initial_lr = 0;                 // the LR scheduler's base LR
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// The in-memory form of the state (as TrainStateShard holds it):
// "<name>.exp_avg", "<name>.exp_avg_sq" and "<name>.step" (int64 0-d) for
// every parameter with state. Every tensor must belong to a name of
// `group.param_names`.
absl::Status SavePtOptimizer(const std::string& path,
                             const OptimizerGroup& group,
                             const PtTensorDict& state);
// Reads that layout (every group needs param_names) or the flat dict
// {"<name>.exp_avg": ...} of checkpoints written before it; returns the
// flat form and, when `group` is given, the first param group (defaults for
// the flat layout). Errors name the file and the offending entry.
absl::StatusOr<PtTensorDict> LoadPtOptimizer(const std::string& path,
                                             OptimizerGroup* group = nullptr);

// `extra_state_world_size_{W}_rank_{R}.pt`, as verl's layout:
// {"lr_scheduler": LambdaLR.state_dict() | None,
//  "rng": {name: uint8 tensor, ...}, "extra_json": "<JSON text>"}.
// The scheduler entry has what torch's LambdaLR.state_dict() holds
// ("base_lrs", "last_epoch", "verbose", "_step_count",
// "_get_lr_called_within_step", "_is_initial", "_last_lr",
// "lr_lambdas": [None]); checkpoints written before hold {"last_epoch"} only.
struct ExtraState {
  int64_t lr_scheduler_step = -1;         // last_epoch; -1: no scheduler (None)
  double lr_scheduler_base_lr = 0;        // base_lrs[0] (the configured LR)
  double lr_scheduler_last_lr = 0;        // _last_lr[0] (the LR now in effect)
  std::map<std::string, at::Tensor> rng;  // "cpu": LibTorch generator, ...
  nlohmann::json user = nlohmann::json::object();  // free-form
};

absl::Status SavePtExtraState(const std::string& path, const ExtraState& state);
absl::StatusOr<ExtraState> LoadPtExtraState(const std::string& path);

// A JSON tree as a pickled Python object (dicts, lists, str, int, float,
// bool, None): `torch.load` -- or plain `pickle` on the zip's data.pkl, no
// torch needed -- gives the same tree back. Used for `data.pt`.
absl::Status SavePtJson(const std::string& path, const nlohmann::json& json);
// Reads such a file (also one written by Python with these types); errors
// name the file and the offending key.
absl::StatusOr<nlohmann::json> LoadPtJson(const std::string& path);

// RNG states as uint8 tensors (what torch.get_rng_state returns for "cpu").
at::Tensor CpuRngState();  // LibTorch's default CPU generator
absl::Status RestoreCpuRngState(const at::Tensor& state);
#ifdef VERL_WITH_CUDA
// The current CUDA device's generator state (torch.cuda.get_rng_state(), what
// verl saves as rng["cuda"]); undefined when no GPU is visible. Only in
// --config=cuda builds; CPU builds save the CPU generator alone.
at::Tensor CudaRngState();
// Restores it; FailedPrecondition when no GPU is visible.
absl::Status RestoreCudaRngState(const at::Tensor& state);
#endif
at::Tensor Mt19937State(const std::mt19937& engine);
absl::Status RestoreMt19937State(const at::Tensor& state, std::mt19937* engine);

}  // namespace verl::ckpt

#endif  // VERL_CKPT_CHECKPOINT_PT_H_
