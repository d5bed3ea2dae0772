// File: verl/ckpt/pt_pickle.h
//
// A restricted unpickler for the `data.pkl` record of PyTorch's zip/pickle
// files (torch.save, LibTorch's pickler). It builds a small value tree and
// never executes anything: the only callables it evaluates are the few that
// torch.save emits for state dicts (torch._utils._rebuild_tensor_v2 /
// _rebuild_tensor / _rebuild_parameter, collections.OrderedDict, which
// becomes a dict; its BUILD state such as `_metadata` is dropped). Tensors
// stay references to their storage record (`data/<key>`), so a reader can
// fetch each tensor's bytes lazily. Any other class (DTensor, numpy arrays,
// user objects) is an error that names the class. Opcodes of protocols 0-5
// that state dicts use are supported (sets and text-mode strings are not).
// Torch-free, so it compiles fast and can be fuzzed on its own.
#ifndef VERL_CKPT_PT_PICKLE_H_
#define VERL_CKPT_PT_PICKLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace verl::ckpt {

struct PyObj;
using PyRef = std::shared_ptr<PyObj>;

struct PyObj {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kStr,
    kBytes,
    kTuple,
    kList,
    kDict,
    kGlobal,   // s = "module.name"
    kStorage,  // s = storage class ("FloatStorage"), key, location, numel
    kTensor,   // items[0] = storage; offset, size, stride (elements)
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;  // bool / int
  double f = 0;
  std::string s;  // str / bytes / global name / storage class
  // Tuple and list elements; a dict as key, value, key, value, ... in
  // insertion order (a repeated key keeps its first position).
  std::vector<PyRef> items;
  std::string key, location;  // storage
  int64_t numel = 0;          // storage elements
  int64_t offset = 0;         // tensor storage offset
  std::vector<int64_t> size, stride;
};

// LibTorch's IValue tag names ("None", "Bool", "Int", "Double", "String",
// "Tuple", "List", "GenericDict", "Tensor", ...), for error messages.
const char* PyKindName(PyObj::Kind kind);

// Unpickles `data`; errors are InvalidArgument (unsupported class, with its
// name) or DataLoss (malformed pickle), prefixed with "<source>: " unless
// `source` is empty.
absl::StatusOr<PyRef> Unpickle(absl::string_view data,
                               absl::string_view source);

}  // namespace verl::ckpt

#endif  // VERL_CKPT_PT_PICKLE_H_
