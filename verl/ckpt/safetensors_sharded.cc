#include "verl/ckpt/safetensors_sharded.h"

#include <cstdio>
#include <filesystem>
#include <regex>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::ckpt {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

uint64_t TensorBytes(const at::Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * t.element_size();
}

bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

// Removes earlier shards / index that the save just done did not write.
absl::Status RemoveStaleFiles(const std::string& dir,
                              const std::set<std::string>& written) {
  static const std::regex kShard(R"(model-\d{5}-of-\d{5}\.safetensors)");
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool ours = name == kSafetensorsIndexFile ||
                      name == kSafetensorsSingleFile ||
                      std::regex_match(name, kShard);
    if (ours && written.count(name) == 0) fs::remove(entry.path(), ec);
    if (ec) {
      return absl::InternalError(absl::StrCat(
          entry.path().string(), ": cannot remove stale file: ", ec.message()));
    }
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat(dir, ": cannot list: ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> ShardIndex::Files() const {
  std::set<std::string> files;
  for (const auto& [name, file] : weight_map) files.insert(file);
  return {files.begin(), files.end()};
}

absl::StatusOr<ShardIndex> ReadShardIndex(const std::string& path) {
  VERL_ASSIGN_OR_RETURN(Json json, core::ReadJsonFile(path));
  auto bad = [&path](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (!json.is_object()) return bad("index is not a JSON object");
  ShardIndex index;
  auto md = json.find("metadata");
  if (md != json.end() && md->is_object()) {
    auto total = md->find("total_size");
    if (total != md->end()) {
      if (!total->is_number_unsigned()) {
        return bad("metadata.total_size is not a non-negative integer");
      }
      index.total_size = total->get<uint64_t>();
    }
  }
  auto map = json.find("weight_map");
  if (map == json.end() || !map->is_object()) {
    return bad("missing 'weight_map' object");
  }
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string() || !IsPlainFileName(file.get<std::string>())) {
      return bad(absl::StrCat("weight_map['", name,
                              "'] is not a plain file name: ", file.dump()));
    }
    index.weight_map[name] = file.get<std::string>();
  }
  return index;
}

std::string ShardIndexToJson(const ShardIndex& index) {
  Json json = {{"metadata", {{"total_size", index.total_size}}},
               {"weight_map", index.weight_map}};
  return json.dump(2) + "\n";
}

std::string ShardFileName(int index, int count) {
  return absl::StrFormat("model-%05d-of-%05d.safetensors", index + 1, count);
}

std::vector<std::vector<std::string>> PlanShards(const TensorMap& tensors,
                                                 uint64_t max_shard_size) {
  std::vector<std::vector<std::string>> shards;
  std::vector<std::string> current;
  uint64_t current_size = 0;
  for (const auto& [name, tensor] : tensors) {
    const uint64_t size = TensorBytes(tensor);
    if (size > max_shard_size) {
      shards.push_back({name});
      continue;
    }
    if (current_size + size > max_shard_size) {
      shards.push_back(std::move(current));
      current.clear();
      current_size = 0;
    }
    current.push_back(name);
    current_size += size;
  }
  if (!current.empty() || shards.empty()) shards.push_back(std::move(current));
  return shards;
}

absl::Status SaveSafetensorsFolder(const std::string& dir,
                                   const TensorMap& tensors,
                                   uint64_t max_shard_size,
                                   const StMetadata& metadata) {
  const std::vector<std::vector<std::string>> plan =
      PlanShards(tensors, max_shard_size);
  std::set<std::string> written;
  if (plan.size() == 1) {
    VERL_RETURN_IF_ERROR(SaveSafetensors(JoinPath(dir, kSafetensorsSingleFile),
                                         tensors, metadata));
    written.insert(kSafetensorsSingleFile);
    return RemoveStaleFiles(dir, written);
  }
  ShardIndex index;
  for (size_t i = 0; i < plan.size(); ++i) {
    const std::string file = ShardFileName(i, plan.size());
    TensorMap shard;
    for (const std::string& name : plan[i]) {
      shard[name] = tensors.at(name);
      index.weight_map[name] = file;
      index.total_size += TensorBytes(shard[name]);
    }
    VERL_RETURN_IF_ERROR(SaveSafetensors(JoinPath(dir, file), shard, metadata));
    written.insert(file);
  }
  VERL_RETURN_IF_ERROR(core::WriteFileAtomic(
      JoinPath(dir, kSafetensorsIndexFile), ShardIndexToJson(index)));
  written.insert(kSafetensorsIndexFile);
  return RemoveStaleFiles(dir, written);
}

absl::StatusOr<std::vector<std::string>> SafetensorsFolderFiles(
    const std::string& dir) {
  const std::string index_path = JoinPath(dir, kSafetensorsIndexFile);
  if (fs::exists(index_path)) {
    VERL_ASSIGN_OR_RETURN(ShardIndex index, ReadShardIndex(index_path));
    std::vector<std::string> paths;
    for (const std::string& file : index.Files()) {
      paths.push_back(JoinPath(dir, file));
    }
    return paths;
  }
  const std::string single = JoinPath(dir, kSafetensorsSingleFile);
  if (fs::exists(single)) return std::vector<std::string>{single};
  return absl::NotFoundError(absl::StrCat(dir, ": no ", kSafetensorsSingleFile,
                                          " or ", kSafetensorsIndexFile));
}

absl::Status ForEachTensorInFolder(
    const std::string& dir,
    const std::function<absl::Status(const std::string&, const at::Tensor&)>&
        fn) {
  const std::string index_path = JoinPath(dir, kSafetensorsIndexFile);
  const bool sharded = fs::exists(index_path);
  ShardIndex index;
  if (sharded) {
    VERL_ASSIGN_OR_RETURN(index, ReadShardIndex(index_path));
  }
  VERL_ASSIGN_OR_RETURN(std::vector<std::string> paths,
                        SafetensorsFolderFiles(dir));
  for (const std::string& path : paths) {
    VERL_ASSIGN_OR_RETURN(SafetensorsReader reader,
                          SafetensorsReader::Open(path));
    if (sharded) {
      const std::string file = fs::path(path).filename().string();
      for (const std::string& name : reader.names()) {
        auto it = index.weight_map.find(name);
        if (it == index.weight_map.end() || it->second != file) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, ": holds tensor '", name, "' that ", index_path,
              it == index.weight_map.end() ? " does not list"
                                           : " assigns to " + it->second));
        }
      }
      for (const auto& [name, f] : index.weight_map) {
        if (f == file && !reader.Contains(name)) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": missing tensor '", name, "' that ",
                           index_path, " assigns to it"));
        }
      }
    }
    for (const std::string& name : reader.names()) {
      VERL_ASSIGN_OR_RETURN(at::Tensor tensor, reader.Get(name));
      VERL_RETURN_IF_ERROR(fn(name, tensor));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorMap> LoadSafetensorsFolder(const std::string& dir) {
  TensorMap out;
  VERL_RETURN_IF_ERROR(ForEachTensorInFolder(
      dir, [&out](const std::string& name, const at::Tensor& t) {
        out[name] = t;
        return absl::OkStatus();
      }));
  return out;
}

}  // namespace verl::ckpt
