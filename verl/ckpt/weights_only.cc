// File: verl/ckpt/weights_only.cc
#include "verl/ckpt/weights_only.h"

#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "verl/ckpt/pt_archive.h"
#include "verl/core/pickle.h"
#include "verl/core/status.h"

namespace verl::ckpt {
namespace {

// torch/_weights_only_unpickler.py, _get_allowed_globals().
const std::set<std::string>& AllowedGlobals() {
  static const std::set<std::string>* allowed = [] {
    auto* s = new std::set<std::string>{
        "collections.OrderedDict",
        "collections.Counter",
        "torch.nn.parameter.Parameter",
        "torch.serialization._get_layout",
        "torch.Size",
        "torch.Tensor",
        "torch.device",
        "_codecs.encode",
        "builtins.bytearray",
        "builtins.set",
        "builtins.complex",
        "torch._tensor._rebuild_from_type_v2",
        // Storage classes kept as such (the legacy ones are below).
        "torch.storage.TypedStorage",
        "torch.storage.UntypedStorage",
        "torch.UntypedStorage",
        // Quantization schemes.
        "torch.per_tensor_affine",
        "torch.per_tensor_symmetric",
        "torch.per_channel_affine",
        "torch.per_channel_symmetric",
        "torch.per_channel_affine_float_qparams",
    };
    // _tensor_rebuild_functions().
    for (const char* f :
         {"_rebuild_parameter", "_rebuild_parameter_with_state",
          "_rebuild_qtensor", "_rebuild_tensor", "_rebuild_tensor_v2",
          "_rebuild_tensor_v3", "_rebuild_sparse_tensor",
          "_rebuild_meta_tensor_no_storage", "_rebuild_wrapper_subclass",
          "_rebuild_device_tensor_from_numpy",
          "_rebuild_device_tensor_from_cpu_tensor"}) {
      s->insert(absl::StrCat("torch._utils.", f));
    }
    // dtypes as str(dtype) prints them (_dtype_to_storage_type_map,
    // _new_dtypes, uint1..7, int1..7).
    for (const char* d :
         {"float64",         "float32",     "float16",       "bfloat16",
          "int64",           "int32",       "int16",         "int8",
          "uint8",           "bool",        "complex32",     "complex64",
          "complex128",      "quint8",      "qint8",         "qint32",
          "quint4x2",        "quint2x4",    "uint16",        "uint32",
          "uint64",          "float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz",
          "float8_e4m3fnuz", "bits8",       "bits16",        "bits1x8",
          "bits2x4",         "bits4x2"}) {
      s->insert(absl::StrCat("torch.", d));
    }
    for (int x = 1; x < 8; ++x) {
      s->insert(absl::StrCat("torch.uint", x));
      s->insert(absl::StrCat("torch.int", x));
    }
    // torch._tensor_classes and the legacy torch._storage_classes.
    for (const char* t : {"Double", "Float", "Half", "BFloat16", "Long", "Int",
                          "Short", "Char", "Byte", "Bool"}) {
      s->insert(absl::StrCat("torch.", t, "Tensor"));
      s->insert(absl::StrCat("torch.cuda.", t, "Tensor"));
    }
    for (const char* t :
         {"Double", "Float", "Half", "BFloat16", "Long", "Int", "Short", "Char",
          "Byte", "Bool", "ComplexDouble", "ComplexFloat", "QUInt8", "QInt8",
          "QInt32", "QUInt4x2", "QUInt2x4"}) {
      s->insert(absl::StrCat("torch.", t, "Storage"));
    }
    return s;
  }();
  return *allowed;
}

}  // namespace

bool IsWeightsOnlyGlobal(absl::string_view global) {
  return AllowedGlobals().count(std::string(global)) > 0;
}

bool IsWeightsOnlyOpcode(uint8_t op) {
  // The opcodes Unpickler._load handles.
  static const std::set<uint8_t> kOps = {
      'c',  0x81, 'R',  'b',  'a', 'e', 's', 'u',  '(',  't', 0x85, 0x86,
      0x87, 'N',  0x89, 0x88, ')', ']', '}', 0x8f, 'J',  'K', 'M',  'G',
      'X',  'U',  'Q',  'h',  'j', 'q', 'r', 0x8a, 0x80, '.'};
  return kOps.count(op) > 0;
}

absl::Status CheckWeightsOnlyLoadable(const std::string& path) {
  core::PickleTrace trace;
  PyRef top;
  VERL_RETURN_IF_ERROR(PtArchive::OpenObject(path, &top, &trace).status());
  std::vector<std::string> refused;
  if (trace.protocol != 2) {
    refused.push_back(absl::StrCat("pickle protocol ", trace.protocol,
                                   " (torch.save writes 2)"));
  }
  std::set<std::string> seen;
  for (const std::string& g : trace.globals) {
    if (!IsWeightsOnlyGlobal(g) && seen.insert(g).second) {
      refused.push_back("GLOBAL " + g);
    }
  }
  for (uint8_t op : trace.opcodes) {
    if (!IsWeightsOnlyOpcode(op)) {
      refused.push_back(absl::StrFormat("opcode 0x%02x", op));
    }
  }
  if (refused.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": torch.load(weights_only=True) would refuse ",
                   absl::StrJoin(refused, ", ")));
}

}  // namespace verl::ckpt
