// File: verl/ckpt/checkpoint_pt.cc
#include "verl/ckpt/checkpoint_pt.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#ifdef VERL_WITH_CUDA
#include <ATen/detail/CUDAHooksInterface.h>
#endif
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/ckpt/pt_archive.h"
#include "verl/ckpt/pt_pickle.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::ckpt {
namespace {

// Writes `value` as torch.save does, streaming into a temp file that is
// fsynced and renamed. Aggregates are not type-tagged (no
// torch.jit._pickle.restore_type_tag), so torch.load(weights_only=True)
// accepts the file.
absl::Status SaveIValue(const std::string& path, const c10::IValue& value) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  }
  bool write_ok = true;
  try {
    std::vector<char> pickle;
    torch::jit::Pickler pickler(
        [&](const char* buf, size_t n) {
          pickle.insert(pickle.end(), buf, buf + n);
        },
        nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(value);
    pickler.stop();
    caffe2::serialize::PyTorchStreamWriter writer(
        [&](const void* data, size_t n) -> size_t {
          const char* p = static_cast<const char*>(data);
          size_t left = n;
          while (write_ok && left > 0) {
            const ssize_t w = ::write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0)
              write_ok = false;
            else {
              p += w;
              left -= w;
            }
          }
          return n;
        });
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(),
                                       pickler.tensorData(), writer);
    writer.writeEndOfFile();
  } catch (const std::exception& e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return absl::InternalError(
        absl::StrCat(path, ": cannot serialize: ", e.what()));
  }
  if (!write_ok || ::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", err));
  }
  const size_t slash = path.rfind('/');
  return core::FsyncPath(slash == std::string::npos ? "."
                                                    : path.substr(0, slash));
}

// First line of an exception message (c10 appends backtraces).
std::string FirstLine(const char* what) {
  std::string s(what);
  const size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

at::Tensor BytesTensor(const std::string& bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

absl::StatusOr<std::string> TensorBytes(const at::Tensor& t,
                                        const std::string& what) {
  if (!t.defined() || t.scalar_type() != at::kByte || t.dim() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected a 1-D uint8 tensor"));
  }
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel());
}

// A list pickled as a plain Python list: typed lists (c10::List<double>)
// would be pickled as torch.jit._pickle.build_doublelist calls, which
// torch.load(weights_only=True) refuses.
c10::impl::GenericList AnyList(const std::vector<c10::IValue>& values) {
  c10::impl::GenericList list(c10::AnyType::get());
  for (const c10::IValue& v : values) list.push_back(v);
  return list;
}

absl::StatusOr<c10::IValue> JsonToIValue(const nlohmann::json& j,
                                         const std::string& where) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return c10::IValue();
    case nlohmann::json::value_t::boolean:
      return c10::IValue(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return c10::IValue(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      if (j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": integer beyond int64"));
      }
      return c10::IValue(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::json::value_t::number_float:
      return c10::IValue(j.get<double>());
    case nlohmann::json::value_t::string:
      return c10::IValue(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      c10::impl::GenericList list(c10::AnyType::get());
      for (size_t i = 0; i < j.size(); ++i) {
        VERL_ASSIGN_OR_RETURN(
            c10::IValue v,
            JsonToIValue(j[i], absl::StrCat(where, "[", i, "]")));
        list.push_back(std::move(v));
      }
      return c10::IValue(list);
    }
    case nlohmann::json::value_t::object: {
      c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
      for (const auto& [k, v] : j.items()) {
        VERL_ASSIGN_OR_RETURN(c10::IValue iv,
                              JsonToIValue(v, absl::StrCat(where, ".", k)));
        dict.insert(k, std::move(iv));
      }
      return c10::IValue(dict);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unsupported JSON value"));
  }
}

}  // namespace

absl::Status SavePtJson(const std::string& path, const nlohmann::json& json) {
  VERL_ASSIGN_OR_RETURN(c10::IValue value, JsonToIValue(json, path));
  return SaveIValue(path, value);
}

absl::StatusOr<nlohmann::json> LoadPtJson(const std::string& path) {
  VERL_ASSIGN_OR_RETURN(PyRef top, PtArchive::LoadObject(path));
  return core::PyToJson(*top, path);
}

absl::Status SavePtTensorDict(const std::string& path,
                              const PtTensorDict& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", name, "' is undefined"));
    }
    dict.insert(name, tensor.detach().contiguous());
  }
  return SaveIValue(path, c10::IValue(dict));
}

absl::StatusOr<PtTensorDict> LoadPtTensorDict(const std::string& path) {
  VERL_ASSIGN_OR_RETURN(PtArchive archive, PtArchive::Open(path));
  PtTensorDict out;
  // Storages shared by several tensors (views) are read once, as torch.load.
  std::map<std::string, int> uses;
  for (const PtTensorInfo& t : archive.tensors()) ++uses[t.storage_key];
  std::map<std::string, at::Tensor> shared;
  for (const PtTensorInfo& t : archive.tensors()) {
    if (uses[t.storage_key] == 1) {
      VERL_ASSIGN_OR_RETURN(out[t.name], archive.Read(t));
      continue;
    }
    at::Tensor& bytes = shared[t.storage_key];
    if (!bytes.defined()) {
      VERL_ASSIGN_OR_RETURN(bytes, archive.ReadStorage(t.storage_key));
    }
    const int64_t elem = c10::elementSize(t.dtype);
    out[t.name] = bytes.narrow(0, 0, bytes.numel() / elem * elem)
                      .view(t.dtype)
                      .as_strided(t.shape, t.stride, t.storage_offset);
  }
  return out;
}

namespace {

constexpr const char* kMoments[] = {"exp_avg", "exp_avg_sq"};

// The entry of str `key` in a pickled dict, or nullptr.
const PyObj* DictGet(const PyObj& dict, absl::string_view key) {
  for (size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    const PyObj& name = *dict.items[k];
    if (name.kind == PyObj::Kind::kStr && name.s == key) {
      return dict.items[k + 1].get();
    }
  }
  return nullptr;
}

bool IsNumber(const PyObj* o) {
  return o != nullptr &&
         (o->kind == PyObj::Kind::kFloat || o->kind == PyObj::Kind::kInt);
}

double NumberOf(const PyObj& o) {
  return o.kind == PyObj::Kind::kFloat ? o.f : static_cast<double>(o.i);
}

// The torch layout's param groups: the index -> name map over all groups,
// and the first group's hyperparameters into `group`.
absl::Status ReadParamGroups(const std::string& path, const PyObj& groups,
                             std::map<int64_t, std::string>* names,
                             OptimizerGroup* group) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (groups.kind != PyObj::Kind::kList || groups.items.empty()) {
    return bad("param_groups is not a non-empty list");
  }
  for (size_t g = 0; g < groups.items.size(); ++g) {
    const PyObj& pg = *groups.items[g];
    const std::string where = absl::StrCat("param_groups[", g, "]");
    if (pg.kind != PyObj::Kind::kDict) return bad(where + " is not a dict");
    const PyObj* params = DictGet(pg, "params");
    const PyObj* pnames = DictGet(pg, "param_names");
    if (params == nullptr || params->kind != PyObj::Kind::kList) {
      return bad(where + " has no params list");
    }
    if (pnames == nullptr || pnames->kind != PyObj::Kind::kList ||
        pnames->items.size() != params->items.size()) {
      return bad(where +
                 " has no param_names list as long as params (needed to map "
                 "the optimizer's indices to parameter names)");
    }
    for (size_t i = 0; i < params->items.size(); ++i) {
      const PyObj& id = *params->items[i];
      const PyObj& name = *pnames->items[i];
      if (id.kind != PyObj::Kind::kInt || name.kind != PyObj::Kind::kStr) {
        return bad(absl::StrCat(where, ".params[", i,
                                "] is not an int with a str name"));
      }
      if (!names->emplace(id.i, name.s).second) {
        return bad(
            absl::StrCat(where, ": parameter index ", id.i, " appears twice"));
      }
    }
    if (g > 0 || group == nullptr) continue;
    group->param_names.clear();
    for (const PyRef& n : pnames->items) group->param_names.push_back(n->s);
    if (const PyObj* v = DictGet(pg, "lr"); IsNumber(v))
      group->lr = NumberOf(*v);
    group->initial_lr = group->lr;
    if (const PyObj* v = DictGet(pg, "initial_lr"); IsNumber(v)) {
      group->initial_lr = NumberOf(*v);
    }
    if (const PyObj* v = DictGet(pg, "eps"); IsNumber(v)) {
      group->eps = NumberOf(*v);
    }
    if (const PyObj* v = DictGet(pg, "weight_decay"); IsNumber(v)) {
      group->weight_decay = NumberOf(*v);
    }
    const PyObj* betas = DictGet(pg, "betas");
    if (betas != nullptr && betas->items.size() == 2 &&
        IsNumber(betas->items[0].get()) && IsNumber(betas->items[1].get())) {
      group->beta1 = NumberOf(*betas->items[0]);
      group->beta2 = NumberOf(*betas->items[1]);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SavePtOptimizer(const std::string& path,
                             const OptimizerGroup& group,
                             const PtTensorDict& state) {
  c10::impl::GenericDict by_index(c10::IntType::get(), c10::AnyType::get());
  std::vector<c10::IValue> params, names;
  size_t used = 0;
  for (size_t i = 0; i < group.param_names.size(); ++i) {
    const std::string& name = group.param_names[i];
    params.emplace_back(static_cast<int64_t>(i));
    names.emplace_back(name);
    auto step = state.find(name + ".step");
    if (step == state.end()) continue;
    c10::Dict<std::string, at::Tensor> entry;
    // torch keeps the step count as a float32 0-d tensor.
    entry.insert("step",
                 at::scalar_tensor(step->second.item<double>(), at::kFloat));
    for (const char* moment : kMoments) {
      auto it = state.find(absl::StrCat(name, ".", moment));
      if (it == state.end() || !it->second.defined()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": parameter '", name, "' has a step but no ", moment));
      }
      entry.insert(moment, it->second.detach().contiguous());
    }
    used += 3;
    by_index.insert(static_cast<int64_t>(i), entry);
  }
  if (used != state.size()) {
    std::set<std::string> known(group.param_names.begin(),
                                group.param_names.end());
    for (const auto& [key, t] : state) {
      const size_t dot = key.rfind('.');
      if (dot == std::string::npos || !known.count(key.substr(0, dot))) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": optimizer tensor '", key,
                         "' belongs to no parameter of param_names"));
      }
    }
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": optimizer state has entries other than "
                     "step/exp_avg/exp_avg_sq"));
  }
  // The param group as torch >= 2.7's AdamW.state_dict() writes it (older
  // versions ignore decoupled_weight_decay); initial_lr is LambdaLR's.
  c10::impl::GenericDict pg(c10::StringType::get(), c10::AnyType::get());
  pg.insert("lr", group.lr);
  pg.insert("betas", c10::ivalue::Tuple::create(group.beta1, group.beta2));
  pg.insert("eps", group.eps);
  pg.insert("weight_decay", group.weight_decay);
  pg.insert("amsgrad", false);
  pg.insert("maximize", false);
  pg.insert("foreach", c10::IValue());
  pg.insert("capturable", false);
  pg.insert("differentiable", false);
  pg.insert("fused", c10::IValue());
  pg.insert("decoupled_weight_decay", true);
  pg.insert("initial_lr", group.initial_lr);
  pg.insert("params", AnyList(params));
  pg.insert("param_names", AnyList(names));
  c10::impl::GenericDict top(c10::StringType::get(), c10::AnyType::get());
  top.insert("state", by_index);
  top.insert("param_groups", AnyList({pg}));
  return SaveIValue(path, c10::IValue(top));
}

absl::StatusOr<PtTensorDict> LoadPtOptimizer(const std::string& path,
                                             OptimizerGroup* group) {
  PyRef top;
  VERL_ASSIGN_OR_RETURN(PtArchive archive, PtArchive::OpenObject(path, &top));
  const PyObj* state =
      top->kind == PyObj::Kind::kDict ? DictGet(*top, "state") : nullptr;
  const PyObj* groups =
      top->kind == PyObj::Kind::kDict ? DictGet(*top, "param_groups") : nullptr;
  if (state == nullptr && groups == nullptr) {
    if (group != nullptr) *group = OptimizerGroup();
    return LoadPtTensorDict(path);  // the flat layout of older checkpoints
  }
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (state == nullptr || state->kind != PyObj::Kind::kDict) {
    return bad("has param_groups but no state dict");
  }
  std::map<int64_t, std::string> names;
  if (groups == nullptr) return bad("has state but no param_groups");
  VERL_RETURN_IF_ERROR(ReadParamGroups(path, *groups, &names, group));
  PtTensorDict out;
  for (size_t k = 0; k + 1 < state->items.size(); k += 2) {
    const PyObj& id = *state->items[k];
    const PyObj& entry = *state->items[k + 1];
    if (id.kind != PyObj::Kind::kInt || !names.count(id.i)) {
      return bad(absl::StrCat("state key ", core::PyTypeName(id), " ",
                              id.kind == PyObj::Kind::kInt ? id.i : -1,
                              " is not a parameter index of param_groups"));
    }
    const std::string& name = names.at(id.i);
    const std::string where = absl::StrCat("state[", id.i, "] ('", name, "')");
    if (entry.kind != PyObj::Kind::kDict) return bad(where + " is not a dict");
    for (size_t e = 0; e + 1 < entry.items.size(); e += 2) {
      const PyObj& key = *entry.items[e];
      if (key.kind != PyObj::Kind::kStr ||
          (key.s != "step" && key.s != kMoments[0] && key.s != kMoments[1])) {
        return bad(absl::StrCat(
            where, " has entry '", key.s,
            "' (only AdamW's step, exp_avg, exp_avg_sq are supported; "
            "amsgrad is not)"));
      }
    }
    const PyObj* step = DictGet(entry, "step");
    double step_value = 0;
    if (IsNumber(step)) {
      step_value = NumberOf(*step);
    } else if (step != nullptr && step->As<PtTensorRef>() != nullptr) {
      VERL_ASSIGN_OR_RETURN(PtTensorInfo info,
                            archive.Describe(name + ".step", *step));
      if (info.numel() != 1) return bad(where + " step is not a scalar");
      VERL_ASSIGN_OR_RETURN(at::Tensor t, archive.Read(info));
      step_value = t.item<double>();
    } else {
      return bad(where + " has no step");
    }
    out[name + ".step"] = at::scalar_tensor(
        static_cast<int64_t>(std::llround(step_value)), at::kLong);
    for (const char* moment : kMoments) {
      const PyObj* value = DictGet(entry, moment);
      if (value == nullptr) return bad(absl::StrCat(where, " has no ", moment));
      const std::string key = absl::StrCat(name, ".", moment);
      VERL_ASSIGN_OR_RETURN(PtTensorInfo info, archive.Describe(key, *value));
      VERL_ASSIGN_OR_RETURN(out[key], archive.Read(info));
    }
  }
  return out;
}

absl::Status SavePtExtraState(const std::string& path,
                              const ExtraState& state) {
  c10::impl::GenericDict top(c10::StringType::get(), c10::AnyType::get());
  if (state.lr_scheduler_step >= 0) {
    // LambdaLR.state_dict() after `last_epoch` steps: the keys of torch 2.x's
    // LRScheduler.__dict__ (verbose up to 2.6, _is_initial from 2.7 on;
    // load_state_dict takes both), lr_lambdas None for plain functions.
    const int64_t step = state.lr_scheduler_step;
    c10::impl::GenericDict sched(c10::StringType::get(), c10::AnyType::get());
    sched.insert("base_lrs", AnyList({state.lr_scheduler_base_lr}));
    sched.insert("last_epoch", step);
    sched.insert("verbose", false);
    sched.insert("_step_count", step + 1);
    sched.insert("_get_lr_called_within_step", false);
    sched.insert("_is_initial", false);
    sched.insert("_last_lr", AnyList({state.lr_scheduler_last_lr}));
    sched.insert("lr_lambdas", AnyList({c10::IValue()}));
    top.insert("lr_scheduler", sched);
  } else {
    top.insert("lr_scheduler", c10::IValue());
  }
  c10::Dict<std::string, at::Tensor> rng;
  for (const auto& [name, t] : state.rng) rng.insert(name, t.contiguous());
  top.insert("rng", rng);
  top.insert("extra_json", state.user.dump());
  return SaveIValue(path, c10::IValue(top));
}

absl::StatusOr<ExtraState> LoadPtExtraState(const std::string& path) {
  PyRef top;
  VERL_ASSIGN_OR_RETURN(PtArchive archive, PtArchive::OpenObject(path, &top));
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (top->kind != PyObj::Kind::kDict) {
    return bad("expected a dict, found " + core::PyTypeName(*top));
  }
  ExtraState state;
  const PyObj* sched = DictGet(*top, "lr_scheduler");
  if (sched != nullptr && sched->kind != PyObj::Kind::kNone) {
    const PyObj* last = sched->kind == PyObj::Kind::kDict
                            ? DictGet(*sched, "last_epoch")
                            : nullptr;
    if (last == nullptr || last->kind != PyObj::Kind::kInt) {
      return bad("lr_scheduler has no integer last_epoch");
    }
    state.lr_scheduler_step = last->i;
    // The first element of a list of numbers (absent before: 0).
    auto first = [&](const char* key) {
      const PyObj* list = DictGet(*sched, key);
      return list != nullptr && !list->items.empty() &&
                     IsNumber(list->items[0].get())
                 ? NumberOf(*list->items[0])
                 : 0.0;
    };
    state.lr_scheduler_base_lr = first("base_lrs");
    state.lr_scheduler_last_lr = first("_last_lr");
  }
  const PyObj* rng = DictGet(*top, "rng");
  if (rng != nullptr && rng->kind != PyObj::Kind::kNone) {
    if (rng->kind != PyObj::Kind::kDict) return bad("rng is not a dict");
    for (size_t k = 0; k + 1 < rng->items.size(); k += 2) {
      const PyObj& name = *rng->items[k];
      if (name.kind != PyObj::Kind::kStr ||
          rng->items[k + 1]->As<PtTensorRef>() == nullptr) {
        return bad("rng entries must map names to tensors");
      }
      VERL_ASSIGN_OR_RETURN(
          PtTensorInfo info,
          archive.Describe("rng." + name.s, *rng->items[k + 1]));
      VERL_ASSIGN_OR_RETURN(state.rng[name.s], archive.Read(info));
    }
  }
  if (const PyObj* json = DictGet(*top, "extra_json"); json != nullptr) {
    if (json->kind != PyObj::Kind::kStr) return bad("extra_json is not a str");
    state.user = nlohmann::json::parse(json->s, nullptr,
                                       /*allow_exceptions=*/false);
    if (state.user.is_discarded()) return bad("extra_json is not valid JSON");
  }
  return state;
}

at::Tensor CpuRngState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

absl::Status RestoreCpuRngState(const at::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad CPU RNG state: ", FirstLine(e.what())));
  }
  return absl::OkStatus();
}

#ifdef VERL_WITH_CUDA
at::Tensor CudaRngState() {
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  if (!hooks.hasCUDA()) return at::Tensor();
  at::Generator gen = hooks.getDefaultCUDAGenerator(
      static_cast<c10::DeviceIndex>(hooks.current_device()));
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

absl::Status RestoreCudaRngState(const at::Tensor& state) {
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  if (!hooks.hasCUDA()) {
    return absl::FailedPreconditionError(
        "the checkpoint has a CUDA RNG state but no GPU is visible");
  }
  at::Generator gen = hooks.getDefaultCUDAGenerator(
      static_cast<c10::DeviceIndex>(hooks.current_device()));
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad CUDA RNG state: ", FirstLine(e.what())));
  }
  return absl::OkStatus();
}
#endif

at::Tensor Mt19937State(const std::mt19937& engine) {
  std::ostringstream out;
  out << engine;
  return BytesTensor(out.str());
}

absl::Status RestoreMt19937State(const at::Tensor& state,
                                 std::mt19937* engine) {
  VERL_ASSIGN_OR_RETURN(std::string bytes, TensorBytes(state, "mt19937 state"));
  std::istringstream in(bytes);
  std::mt19937 restored;
  in >> restored;
  if (in.fail()) return absl::InvalidArgumentError("bad mt19937 state");
  *engine = restored;
  return absl::OkStatus();
}

}  // namespace verl::ckpt
