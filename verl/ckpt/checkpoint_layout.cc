// File: verl/ckpt/checkpoint_layout.cc
#include "verl/ckpt/checkpoint_layout.h"

#include <ATen/ops/cat.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "verl/core/status.h"

namespace verl::ckpt {
namespace {

const std::vector<std::pair<at::ScalarType, const char*>>& DtypeNames() {
  static const auto* names =
      new std::vector<std::pair<at::ScalarType, const char*>>{
          {at::kFloat, "float32"},     {at::kHalf, "float16"},
          {at::kBFloat16, "bfloat16"}, {at::kDouble, "float64"},
          {at::kLong, "int64"},        {at::kInt, "int32"},
          {at::kShort, "int16"},       {at::kChar, "int8"},
          {at::kByte, "uint8"},        {at::kBool, "bool"}};
  return *names;
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string ShapeStr(at::IntArrayRef shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

std::string DtypeName(at::ScalarType type) {
  for (const auto& [t, name] : DtypeNames()) {
    if (t == type) return name;
  }
  return c10::toString(type);
}

absl::StatusOr<at::ScalarType> DtypeFromName(const std::string& name) {
  for (const auto& [t, n] : DtypeNames()) {
    if (name == n) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "'"));
}

std::pair<int64_t, int64_t> ParamLayout::RowRange(int rank,
                                                  int world_size) const {
  if (shard_dim < 0) return {0, 0};
  const int64_t n = shape[shard_dim];
  const int64_t chunk = CeilDiv(n, world_size);
  const int64_t begin = std::min<int64_t>(n, rank * chunk);
  return {begin, std::min<int64_t>(n, begin + chunk)};
}

std::vector<int64_t> ParamLayout::ChunkShape(int rank, int world_size) const {
  std::vector<int64_t> out = shape;
  if (shard_dim >= 0) {
    const auto [begin, end] = RowRange(rank, world_size);
    out[shard_dim] = end - begin;
  }
  return out;
}

ParamLayout MakeParamLayout(const std::vector<int64_t>& shape,
                            at::ScalarType dtype, int world_size) {
  CHECK_GE(world_size, 1);
  ParamLayout layout;
  layout.shape = shape;
  layout.dtype = DtypeName(dtype);
  if (shape.empty()) {
    layout.shard_dim = -1;
  } else {
    layout.padding = CeilDiv(shape[0], world_size) * world_size - shape[0];
  }
  return layout;
}

FsdpLayout MakeFsdpLayout(const std::map<std::string, at::Tensor>& full,
                          int world_size) {
  FsdpLayout layout;
  layout.world_size = world_size;
  for (const auto& [name, tensor] : full) {
    layout.params[name] =
        MakeParamLayout(tensor.sizes().vec(), tensor.scalar_type(), world_size);
  }
  return layout;
}

at::Tensor ShardForRank(const at::Tensor& full, const ParamLayout& layout,
                        int rank, int world_size) {
  CHECK(full.sizes().vec() == layout.shape)
      << "tensor shape " << ShapeStr(full.sizes()) << " != layout "
      << ShapeStr(layout.shape);
  if (layout.shard_dim < 0) return full.detach().clone();
  const auto [begin, end] = layout.RowRange(rank, world_size);
  return full.detach()
      .narrow(layout.shard_dim, begin, end - begin)
      .clone(at::MemoryFormat::Contiguous);
}

std::map<std::string, at::Tensor> ShardStateDict(
    const std::map<std::string, at::Tensor>& full, const FsdpLayout& layout,
    int rank) {
  std::map<std::string, at::Tensor> out;
  for (const auto& [name, tensor] : full) {
    auto it = layout.params.find(name);
    CHECK(it != layout.params.end()) << "no layout for " << name;
    out[name] = ShardForRank(tensor, it->second, rank, layout.world_size);
  }
  return out;
}

absl::Status CheckChunks(const std::string& name, const ParamLayout& layout,
                         const std::vector<std::vector<int64_t>>& shapes,
                         const std::vector<at::ScalarType>& dtypes) {
  const int world = static_cast<int>(shapes.size());
  if (world < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", name, "': no chunks"));
  }
  for (int r = 0; r < world; ++r) {
    const std::vector<int64_t> want = layout.ChunkShape(r, world);
    if (shapes[r] != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", name, "' rank ", r, ": chunk shape ", ShapeStr(shapes[r]),
          ", expected ", ShapeStr(want), " (full shape ",
          ShapeStr(layout.shape), ", ", world, " ranks)"));
    }
    if (dtypes[r] != dtypes[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", name, "' rank ", r, ": dtype ", DtypeName(dtypes[r]),
          " differs from rank 0's ", DtypeName(dtypes[0])));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> UnshardTensor(
    const std::string& name, const ParamLayout& layout,
    const std::vector<at::Tensor>& chunks) {
  std::vector<std::vector<int64_t>> shapes;
  std::vector<at::ScalarType> dtypes;
  for (size_t r = 0; r < chunks.size(); ++r) {
    if (!chunks[r].defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "' rank ", r, ": chunk <missing>"));
    }
    shapes.push_back(chunks[r].sizes().vec());
    dtypes.push_back(chunks[r].scalar_type());
  }
  VERL_RETURN_IF_ERROR(CheckChunks(name, layout, shapes, dtypes));
  if (layout.shard_dim < 0 || chunks.size() == 1) return chunks[0];
  return at::cat(chunks, layout.shard_dim);
}

nlohmann::json FsdpLayoutToJson(const FsdpLayout& layout) {
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [name, p] : layout.params) {
    params[name] = {
        {"shape", p.shape},
        {"shard_dim", p.shard_dim < 0 ? nlohmann::json(nullptr)
                                      : nlohmann::json(p.shard_dim)},
        {"padding", p.padding},
        {"dtype", p.dtype}};
  }
  return {{"FSDP_version", layout.fsdp_version},
          {"world_size", layout.world_size},
          {"mesh_dim_names", layout.mesh_dim_names},
          {"mesh_shape", layout.mesh_shape.empty()
                             ? std::vector<int64_t>{layout.world_size}
                             : layout.mesh_shape},
          {"shard_layout", params}};
}

absl::StatusOr<FsdpLayout> FsdpLayoutFromJson(const nlohmann::json& json,
                                              const std::string& source) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
  };
  if (!json.is_object()) return bad("expected a JSON object");
  if (!json.contains("world_size") || !json["world_size"].is_number_integer() ||
      json["world_size"].get<int64_t>() < 1) {
    return bad("missing or invalid \"world_size\" (a positive integer)");
  }
  FsdpLayout layout;
  layout.world_size = json["world_size"].get<int>();
  if (json.contains("FSDP_version") &&
      json["FSDP_version"].is_number_integer()) {
    layout.fsdp_version = json["FSDP_version"].get<int>();
  }
  if (json.contains("mesh_dim_names")) {
    if (!json["mesh_dim_names"].is_array())
      return bad("bad \"mesh_dim_names\"");
    layout.mesh_dim_names.clear();
    for (const auto& n : json["mesh_dim_names"]) {
      if (!n.is_string()) return bad("bad \"mesh_dim_names\"");
      layout.mesh_dim_names.push_back(n.get<std::string>());
    }
  }
  if (json.contains("mesh_shape")) {
    if (!json["mesh_shape"].is_array()) return bad("bad \"mesh_shape\"");
    for (const auto& n : json["mesh_shape"]) {
      if (!n.is_number_integer() || n.get<int64_t>() < 1) {
        return bad("bad \"mesh_shape\"");
      }
      layout.mesh_shape.push_back(n.get<int64_t>());
    }
  }
  if (!json.contains("shard_layout")) return layout;
  if (!json["shard_layout"].is_object()) return bad("bad \"shard_layout\"");
  for (const auto& [name, p] : json["shard_layout"].items()) {
    const std::string where = absl::StrCat("shard_layout[\"", name, "\"]");
    if (!p.is_object() || !p.contains("shape") || !p["shape"].is_array()) {
      return bad(where + ": missing \"shape\"");
    }
    ParamLayout param;
    for (const auto& d : p["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        return bad(where + ": bad \"shape\"");
      }
      param.shape.push_back(d.get<int64_t>());
    }
    const auto& dim = p.value("shard_dim", nlohmann::json(0));
    if (dim.is_null()) {
      param.shard_dim = -1;
    } else if (dim.is_number_integer() && dim.get<int64_t>() >= 0 &&
               dim.get<int64_t>() < static_cast<int64_t>(param.shape.size())) {
      param.shard_dim = dim.get<int>();
    } else {
      return bad(where + ": bad \"shard_dim\"");
    }
    param.padding = p.value("padding", int64_t{0});
    param.dtype = p.value("dtype", std::string());
    layout.params[name] = std::move(param);
  }
  return layout;
}

}  // namespace verl::ckpt
