// File: verl/ckpt/pt_pickle.h
//
// The restricted unpickler for the `data.pkl` record of PyTorch's zip/pickle
// files (torch.save, LibTorch's pickler): the generic pickle VM of
// verl/core/pickle.h plus the few torch callables torch.save emits for state
// dicts (torch._utils._rebuild_tensor_v2 / _rebuild_tensor /
// _rebuild_parameter(_with_state)) and its ('storage', ...) persistent ids.
// An OrderedDict's BUILD state (`_metadata`) is dropped. Tensors stay
// references to their storage record (`data/<key>`), so a reader can fetch
// each tensor's bytes lazily. Any other class (DTensor, numpy arrays, user
// objects) is an error that names the class. Torch-free.
#ifndef VERL_CKPT_PT_PICKLE_H_
#define VERL_CKPT_PT_PICKLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verl/core/pickle.h"

namespace verl::ckpt {

using core::PyObj;
using core::PyRef;

// A storage persistent id: ('storage', torch.FloatStorage, key, location,
// numel). A kObject named "Storage".
struct PtStorageRef : core::PyExtension {
  std::string cls;       // storage class without "torch.", "FloatStorage"
  std::string key;       // record data/<key>
  std::string location;  // "cpu", "cuda:0"
  int64_t numel = 0;     // elements
};

// A tensor view of a storage (what _rebuild_tensor_v2 returns). A kObject
// named "Tensor".
struct PtTensorRef : core::PyExtension {
  std::shared_ptr<const PtStorageRef> storage;
  int64_t offset = 0;  // storage offset, elements
  std::vector<int64_t> size, stride;
};

// Unpickles a torch.save `data.pkl`; errors are InvalidArgument (unsupported
// class, with its name and, for DTensor, how to save local tensors instead)
// or DataLoss (malformed pickle), prefixed with "<source>: " unless `source`
// is empty. `trace` as in core::Unpickle.
absl::StatusOr<PyRef> UnpickleTorchSave(absl::string_view data,
                                        absl::string_view source,
                                        core::PickleTrace* trace = nullptr);

}  // namespace verl::ckpt

#endif  // VERL_CKPT_PT_PICKLE_H_
