// File: verl/ckpt/pt_pickle.cc
#include "verl/ckpt/pt_pickle.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace verl::ckpt {
namespace {

using Kind = PyObj::Kind;

constexpr char kRebuildV2[] = "torch._utils._rebuild_tensor_v2";
constexpr char kRebuild[] = "torch._utils._rebuild_tensor";
constexpr char kRebuildParam[] = "torch._utils._rebuild_parameter";
constexpr char kRebuildParamState[] =
    "torch._utils._rebuild_parameter_with_state";

bool IsStorageClass(absl::string_view global) {
  return absl::StartsWith(global, "torch.") &&
         absl::EndsWith(global, "Storage") &&
         global.find('.', 6) == absl::string_view::npos;
}

bool IsTorchGlobal(absl::string_view g) {
  return g == kRebuildV2 || g == kRebuild || g == kRebuildParam ||
         g == kRebuildParamState || IsStorageClass(g);
}

absl::StatusOr<std::vector<int64_t>> IntTuple(const PyRef& o) {
  if (o->kind != Kind::kTuple && o->kind != Kind::kList) {
    return absl::InvalidArgumentError("not a tuple");
  }
  std::vector<int64_t> out;
  for (const PyRef& x : o->items) {
    if (x->kind != Kind::kInt) return absl::InvalidArgumentError("not an int");
    out.push_back(x->i);
  }
  return out;
}

absl::Status Unsupported(const std::string& cls, const std::string& via) {
  std::string msg = absl::StrCat(
      "holds an object of class ", cls,
      via.empty() || via == cls ? "" : absl::StrCat(" (rebuilt by ", via, ")"),
      ", which this reader cannot load: only dicts / OrderedDicts of "
      "plain tensors, strings and numbers are supported");
  if (absl::StrContains(cls, "DTensor") || absl::StrContains(via, "DTensor")) {
    absl::StrAppend(&msg,
                    "; FSDP2 DTensor state dicts must be saved as local "
                    "tensors ({k: v.to_local() for k, v in sd.items()})");
  }
  return absl::InvalidArgumentError(msg);
}

PyRef MakeObject(const char* type, std::shared_ptr<core::PyExtension> ext) {
  PyRef o = core::MakePyObj(Kind::kObject);
  o->s = type;
  o->ext = std::move(ext);
  return o;
}

class TorchSaveHooks : public core::PickleHooks {
 public:
  absl::StatusOr<PyRef> Call(const std::string& fn,
                             const std::vector<PyRef>& a) override {
    if (fn == kRebuildV2 || fn == kRebuild) {
      if (a.size() < 4 || a[0]->As<PtStorageRef>() == nullptr ||
          a[1]->kind != Kind::kInt) {
        return absl::DataLossError(absl::StrCat("bad arguments to ", fn));
      }
      auto size = IntTuple(a[2]);
      auto stride = IntTuple(a[3]);
      if (!size.ok() || !stride.ok() || size->size() != stride->size()) {
        return absl::DataLossError(absl::StrCat("bad size/stride for ", fn));
      }
      auto t = std::make_shared<PtTensorRef>();
      t->storage = std::static_pointer_cast<const PtStorageRef>(a[0]->ext);
      t->offset = a[1]->i;
      t->size = *std::move(size);
      t->stride = *std::move(stride);
      return MakeObject("Tensor", std::move(t));
    }
    if (fn == kRebuildParam || fn == kRebuildParamState) {
      if (a.empty() || a[0]->As<PtTensorRef>() == nullptr) {
        return absl::DataLossError(absl::StrCat("bad arguments to ", fn));
      }
      return a[0];
    }
    PyRef args = core::MakePyObj(Kind::kTuple);
    args->items = a;
    std::string cls = core::FirstUnknownGlobal(args, IsTorchGlobal);
    if (cls.empty()) cls = fn;
    return Unsupported(cls, fn);
  }

  absl::StatusOr<PyRef> PersistentLoad(const PyRef& pid) override {
    const auto& a = pid->items;
    if (pid->kind != Kind::kTuple || a.size() < 5 || a[0]->kind != Kind::kStr ||
        a[0]->s != "storage") {
      return absl::DataLossError(
          "persistent id is not a ('storage', ...) tuple");
    }
    if (a[1]->kind != Kind::kGlobal || !IsStorageClass(a[1]->s)) {
      return Unsupported(
          a[1]->kind == Kind::kGlobal ? a[1]->s : core::PyTypeName(*a[1]), "");
    }
    if ((a[2]->kind != Kind::kStr && a[2]->kind != Kind::kInt) ||
        a[3]->kind != Kind::kStr || a[4]->kind != Kind::kInt || a[4]->i < 0) {
      return absl::DataLossError("bad storage persistent id");
    }
    auto s = std::make_shared<PtStorageRef>();
    s->cls = a[1]->s.substr(6);  // drop "torch."
    s->key = a[2]->kind == Kind::kStr ? a[2]->s : std::to_string(a[2]->i);
    s->location = a[3]->s;
    s->numel = a[4]->i;
    return MakeObject("Storage", std::move(s));
  }

  // The state of an OrderedDict (_metadata) or a tensor is dropped.
  absl::Status Build(const PyRef& obj, const PyRef& state) override {
    if (obj->kind != Kind::kDict && obj->As<PtTensorRef>() == nullptr) {
      return absl::DataLossError(
          absl::StrCat("BUILD on ", core::PyTypeName(*obj)));
    }
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<PyRef> UnpickleTorchSave(absl::string_view data,
                                        absl::string_view source,
                                        core::PickleTrace* trace) {
  TorchSaveHooks hooks;
  return core::Unpickle(data, source, &hooks, trace);
}

}  // namespace verl::ckpt
