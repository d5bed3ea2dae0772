// File: verl/parallel/device_mesh.h
//
// A DeviceMesh arranges the ranks of a communicator in a named n-d grid,
// row-major (the last dim varies fastest), like torch's init_device_mesh:
//
//   // 4 ranks: rank = dp * 2 + sp.
//   VERL_ASSIGN_OR_RETURN(DeviceMesh mesh,
//                         DeviceMesh::Create(world, {{"dp", 2}, {"sp", 2}}));
//   mesh.Coordinate("dp");       // this rank's dp index
//   mesh.Get("sp")->AllReduce(t) // among ranks that share this rank's dp
//
// Create() is collective over the whole communicator: it builds one
// sub-communicator per dim for this rank (new Gloo groups over prefixed
// stores) eagerly, in dim order, so no rank can wait on a group another rank
// has not reached. Flatten() merges dims into one further group.
#ifndef VERL_PARALLEL_DEVICE_MESH_H_
#define VERL_PARALLEL_DEVICE_MESH_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/parallel/process_group.h"

namespace verl::parallel {

// Named dims of a grid, major to minor: {{"dp", 2}, {"sp", 2}}.
using MeshDims = std::vector<std::pair<std::string, int>>;

// Grid arithmetic, independent of any communicator. Coordinates of `rank`
// (row-major, last dim fastest) and back; CHECK on out-of-range input.
std::vector<int> MeshCoordinates(const MeshDims& dims, int rank);
int MeshRank(const MeshDims& dims, const std::vector<int>& coords);
// Ranks of the group over `group_dims` (first listed = most significant)
// that contains `rank`: all ranks sharing its other coordinates, in
// group-rank order. NotFound / InvalidArgument for unknown or repeated dims.
absl::StatusOr<std::vector<int>> MeshGroupRanks(
    const MeshDims& dims, const std::vector<std::string>& group_dims, int rank);

class DeviceMesh {
 public:
  using Dims = MeshDims;

  // `dims` sizes must multiply to comm->size(); names distinct, non-empty,
  // without '/' or '.'. `name` keys the groups' rendezvous: meshes created
  // in one job need distinct names.
  static absl::StatusOr<DeviceMesh> Create(std::shared_ptr<Communicator> comm,
                                           Dims dims,
                                           const std::string& name = "mesh");

  const Dims& dims() const { return dims_; }
  int ndim() const { return static_cast<int>(dims_.size()); }
  // Size of one dim (NotFound for an unknown name).
  absl::StatusOr<int> DimSize(const std::string& dim) const;
  // This rank's index along `dim`.
  absl::StatusOr<int> Coordinate(const std::string& dim) const;
  // Coordinates of any rank of the communicator, in dim order.
  std::vector<int> CoordinatesOf(int rank) const {
    return MeshCoordinates(dims_, rank);
  }
  // Inverse of CoordinatesOf (CHECKs the ranges).
  int RankAt(const std::vector<int>& coords) const {
    return MeshRank(dims_, coords);
  }

  // The sub-communicator along `dim` (or a Flatten()ed name) that contains
  // this rank; its rank is this rank's coordinate along that dim.
  absl::StatusOr<std::shared_ptr<Communicator>> Get(
      const std::string& dim) const;
  const std::shared_ptr<Communicator>& comm() const { return comm_; }

  // Collective over the communicator: a group over `dims` (listed major to
  // minor) among ranks sharing the other coordinates, reachable afterwards
  // as Get(flat_name). E.g. Flatten({"dp", "sp"}, "dp_sp").
  absl::StatusOr<std::shared_ptr<Communicator>> Flatten(
      const std::vector<std::string>& dims, const std::string& flat_name);

  // Ranks of the communicator in the group over `dims` containing `rank`,
  // in group-rank order.
  absl::StatusOr<std::vector<int>> GroupRanks(
      const std::vector<std::string>& dims, int rank) const {
    return MeshGroupRanks(dims_, dims, rank);
  }

 private:
  DeviceMesh() = default;
  absl::StatusOr<int> DimIndex(const std::string& dim) const;

  std::shared_ptr<Communicator> comm_;
  Dims dims_;
  std::string name_;
  std::vector<int> my_coords_;
  std::map<std::string, std::shared_ptr<Communicator>> groups_;
};

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_DEVICE_MESH_H_
