// File: verl/core/pickle.h
//
// A restricted unpickler: runs the pickle VM (protocols 0-5, the opcodes plain
// data uses) and builds a small value tree; it never imports or executes
// anything. The only callables it evaluates itself are the plain-data builtins
// collections.OrderedDict / builtins.dict (both become a dict) and
// _codecs.encode (protocol 2's bytes). Everything else a pickle may ask for,
// a class call (REDUCE, NEWOBJ), a persistent id or object state (BUILD), goes
// to PickleHooks, whose defaults refuse it with an error naming the class;
// verl/ckpt/pt_pickle builds torch.save's tensors this way. Sets are not
// supported. Torch-free, so it compiles fast and can be fuzzed on its own.
//
// Used for torch.save state dicts (verl/ckpt) and torch.cuda.memory snapshots
// (verl/profiler, through PickleToJson).
#ifndef VERL_CORE_PICKLE_H_
#define VERL_CORE_PICKLE_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace verl::core {

struct PyObj;
using PyRef = std::shared_ptr<PyObj>;

// What a PickleHooks implementation builds for an object the VM does not know
// (a torch tensor, a storage): subclass it, read it back with PyObj::As<T>().
struct PyExtension {
  virtual ~PyExtension() = default;
};

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
    kGlobal,  // s = "module.name"
    kObject,  // s = type name (e.g. "Tensor"), ext = payload (from hooks)
  };
  Kind kind = Kind::kNone;
  int64_t i = 0;         // bool / int
  bool is_uint = false;  // int above INT64_MAX: the value is uint64_t(i)
  double f = 0;
  std::string s;  // str (UTF-8) / bytes / global name / object type name
  // Tuple and list elements; a dict as key, value, key, value, ... in
  // insertion order (a repeated key keeps its first position, last value).
  std::vector<PyRef> items;
  std::shared_ptr<const PyExtension> ext;  // kObject only

  // The payload of a kObject if it is a T, else nullptr.
  template <typename T>
  const T* As() const {
    return kind == Kind::kObject ? dynamic_cast<const T*>(ext.get()) : nullptr;
  }
};

PyRef MakePyObj(PyObj::Kind kind);

// LibTorch's IValue tag names ("None", "Bool", "Int", "Double", "String",
// "Tuple", "List", "GenericDict", ...; a kObject's own type name), for error
// messages.
std::string PyTypeName(const PyObj& o);

// True for the globals the VM evaluates itself (OrderedDict, dict,
// _codecs.encode).
bool IsBuiltinGlobal(absl::string_view global);

// The first global inside `o` (depth first, bounded) that is neither a builtin
// nor accepted by `known`; "" if none. For "holds an object of class X" errors.
std::string FirstUnknownGlobal(const PyRef& o,
                               bool (*known)(absl::string_view global));

// Extension points for what plain data does not cover. Errors: return
// InvalidArgument for something valid but unsupported (the VM prefixes the
// source), DataLoss for malformed arguments (the VM adds the byte offset).
class PickleHooks {
 public:
  virtual ~PickleHooks() = default;
  // REDUCE / NEWOBJ / NEWOBJ_EX of the global `callable` ("module.name", not a
  // builtin) with positional `args`. Default: InvalidArgument naming the class.
  virtual absl::StatusOr<PyRef> Call(const std::string& callable,
                                     const std::vector<PyRef>& args);
  // PERSID / BINPERSID. Default: InvalidArgument.
  virtual absl::StatusOr<PyRef> PersistentLoad(const PyRef& pid);
  // BUILD: `state` applied to `obj` (the stack top). Default: InvalidArgument.
  virtual absl::Status Build(const PyRef& obj, const PyRef& state);
};

// What a pickle stream used, as the VM ran it: for checks of what another
// unpickler would accept (e.g. torch.load(weights_only=True), see
// verl/ckpt/weights_only.h).
struct PickleTrace {
  int protocol = -1;                 // PROTO's argument; -1: no PROTO
  std::set<uint8_t> opcodes;         // every opcode run
  std::vector<std::string> globals;  // GLOBAL / STACK_GLOBAL "module.name"
};

// Unpickles `data`. Errors are InvalidArgument (unsupported class, with its
// name) or DataLoss (malformed pickle, with the byte offset), prefixed with
// "<source>: " unless `source` is empty. `hooks` may be null (the defaults);
// `trace`, if given, records what the stream used (up to an error).
absl::StatusOr<PyRef> Unpickle(absl::string_view data, absl::string_view source,
                               PickleHooks* hooks = nullptr,
                               PickleTrace* trace = nullptr);

// Plain data as JSON: None, bools, ints, floats, strings, lists and tuples
// (arrays), dicts with string keys (objects). Anything else is an
// InvalidArgument error naming its path below `where` ("where.key[3]").
absl::StatusOr<nlohmann::json> PyToJson(const PyObj& o,
                                        const std::string& where);

// Unpickle + PyToJson; `source` names the data in errors.
absl::StatusOr<nlohmann::json> ReadPickle(absl::string_view data,
                                          absl::string_view source = "");
// Reads a pickle file as JSON (e.g. a torch.cuda.memory snapshot).
absl::StatusOr<nlohmann::json> ReadPickleFile(const std::string& path);

}  // namespace verl::core

#endif  // VERL_CORE_PICKLE_H_
