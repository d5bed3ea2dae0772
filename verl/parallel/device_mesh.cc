// File: verl/parallel/device_mesh.cc
#include "verl/parallel/device_mesh.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "verl/core/status.h"

namespace verl::parallel {
namespace {

std::string DimsString(const DeviceMesh::Dims& dims) {
  return absl::StrJoin(dims, ", ", [](std::string* out, const auto& d) {
    absl::StrAppend(out, d.first, "=", d.second);
  });
}

}  // namespace

std::vector<int> MeshCoordinates(const MeshDims& dims, int rank) {
  int total = 1;
  for (const auto& dim : dims) total *= dim.second;
  CHECK(rank >= 0 && rank < total) << rank << " outside a mesh of " << total;
  std::vector<int> coords(dims.size());
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    coords[i] = rank % dims[i].second;
    rank /= dims[i].second;
  }
  return coords;
}

int MeshRank(const MeshDims& dims, const std::vector<int>& coords) {
  CHECK_EQ(coords.size(), dims.size());
  int rank = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    CHECK(coords[i] >= 0 && coords[i] < dims[i].second) << coords[i];
    rank = rank * dims[i].second + coords[i];
  }
  return rank;
}

absl::StatusOr<std::vector<int>> MeshGroupRanks(
    const MeshDims& dims, const std::vector<std::string>& group_dims,
    int rank) {
  std::vector<int> indices;
  for (const std::string& name : group_dims) {
    auto it = std::find_if(dims.begin(), dims.end(),
                           [&](const auto& d) { return d.first == name; });
    if (it == dims.end()) {
      return absl::NotFoundError(absl::StrCat("mesh (", DimsString(dims),
                                              ") has no dim '", name, "'"));
    }
    const int i = static_cast<int>(it - dims.begin());
    if (std::find(indices.begin(), indices.end(), i) != indices.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dim '", name, "' listed twice"));
    }
    indices.push_back(i);
  }
  // Walk the sub-grid over `group_dims` keeping the other coordinates.
  std::vector<int> coords = MeshCoordinates(dims, rank);
  int count = 1;
  for (int i : indices) count *= dims[i].second;
  std::vector<int> ranks;
  for (int linear = 0; linear < count; ++linear) {
    int rest = linear;
    for (int k = static_cast<int>(indices.size()) - 1; k >= 0; --k) {
      coords[indices[k]] = rest % dims[indices[k]].second;
      rest /= dims[indices[k]].second;
    }
    ranks.push_back(MeshRank(dims, coords));
  }
  return ranks;
}

absl::StatusOr<DeviceMesh> DeviceMesh::Create(
    std::shared_ptr<Communicator> comm, Dims dims, const std::string& name) {
  CHECK(comm != nullptr);
  auto invalid = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", comm->global_rank(), ": device mesh '", name,
                     "' (", DimsString(dims), "): ", parts...));
  };
  if (dims.empty()) return invalid("needs at least one dim");
  std::set<std::string> names;
  int64_t product = 1;
  for (const auto& [dim, size] : dims) {
    if (dim.empty() || absl::StrContains(dim, "/") ||
        absl::StrContains(dim, ".") || !names.insert(dim).second) {
      return invalid(
          "dim names must be distinct, non-empty, without '/' or "
          "'.'; bad: '",
          dim, "'");
    }
    if (size < 1) return invalid("dim '", dim, "' has size ", size);
    product *= size;
  }
  if (product != comm->size()) {
    return invalid("sizes multiply to ", product, " but the communicator has ",
                   comm->size(), " ranks");
  }
  DeviceMesh mesh;
  mesh.comm_ = std::move(comm);
  mesh.dims_ = std::move(dims);
  mesh.name_ = name;
  mesh.my_coords_ = mesh.CoordinatesOf(mesh.comm_->rank());
  for (const auto& [dim, size] : mesh.dims_) {
    VERL_RETURN_IF_ERROR(mesh.Flatten({dim}, dim).status());
  }
  return mesh;
}

absl::StatusOr<int> DeviceMesh::DimIndex(const std::string& dim) const {
  for (int i = 0; i < ndim(); ++i) {
    if (dims_[i].first == dim) return i;
  }
  return absl::NotFoundError(absl::StrCat("device mesh '", name_,
                                          "' has no dim '", dim,
                                          "' (dims: ", DimsString(dims_), ")"));
}

absl::StatusOr<int> DeviceMesh::DimSize(const std::string& dim) const {
  VERL_ASSIGN_OR_RETURN(int i, DimIndex(dim));
  return dims_[i].second;
}

absl::StatusOr<int> DeviceMesh::Coordinate(const std::string& dim) const {
  VERL_ASSIGN_OR_RETURN(int i, DimIndex(dim));
  return my_coords_[i];
}

absl::StatusOr<std::shared_ptr<Communicator>> DeviceMesh::Get(
    const std::string& dim) const {
  auto it = groups_.find(dim);
  if (it == groups_.end()) {
    return absl::NotFoundError(
        absl::StrCat("device mesh '", name_, "' has no group '", dim,
                     "' (dims: ", DimsString(dims_), ")"));
  }
  return it->second;
}

absl::StatusOr<std::shared_ptr<Communicator>> DeviceMesh::Flatten(
    const std::vector<std::string>& dims, const std::string& flat_name) {
  if (groups_.count(flat_name) != 0) {
    return absl::AlreadyExistsError(absl::StrCat(
        "device mesh '", name_, "' already has a group '", flat_name, "'"));
  }
  VERL_ASSIGN_OR_RETURN(std::vector<int> ranks,
                        GroupRanks(dims, comm_->rank()));
  // Groups along the same dims are told apart by their smallest rank.
  const int first = *std::min_element(ranks.begin(), ranks.end());
  VERL_ASSIGN_OR_RETURN(
      std::shared_ptr<Communicator> group,
      comm_->NewGroup(ranks, absl::StrCat(name_, ".", flat_name, ".", first)));
  groups_[flat_name] = group;
  return group;
}

}  // namespace verl::parallel
