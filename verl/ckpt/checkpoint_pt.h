// File: verl/ckpt/checkpoint_pt.h
//
// PyTorch `.pt` files (zip archive + pickle, the format of torch.save) for
// checkpoint shards, written with LibTorch's pickler so Python's `torch.load`
// reads what we write. Tensor dicts are read with PtArchive (pt_archive.h),
// which also reads what `torch.save(model.state_dict())` writes (a
// collections.OrderedDict of plain tensors); the extra state with LibTorch's
// unpickler.
//
// Supported content: a dict str -> tensor (model / optimizer shards), and the
// extra-state dict below (nested dicts of str, int, float, tensors). Files
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

// `extra_state_world_size_{W}_rank_{R}.pt`, as verl's layout:
// {"lr_scheduler": {"last_epoch": step} | None,
//  "rng": {name: uint8 tensor, ...}, "extra_json": "<JSON text>"}.
struct ExtraState {
  int64_t lr_scheduler_step = -1;         // -1: no scheduler (None)
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
