#include "verl/models/hf_checkpoint.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/equal.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::models {
namespace {

namespace fs = std::filesystem;

constexpr char kConfigFile[] = "config.json";
constexpr char kGenerationFile[] = "generation_config.json";
constexpr char kEmbedName[] = "model.embed_tokens.weight";
constexpr char kLmHeadName[] = "lm_head.weight";

std::string Join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

absl::Status FsError(const std::string& what, const std::string& path,
                     const std::error_code& ec) {
  return absl::InternalError(
      absl::StrCat(path, ": ", what, ": ", ec.message()));
}

// A fresh sibling of `dir` to build the new folder in.
std::string TempSibling(const std::string& dir, absl::string_view tag) {
  std::random_device rd;
  return absl::StrCat(dir, ".", tag, "-", ::getpid(), "-", rd() % 1000000);
}

// Whether `lm_head` is the embedding matrix (shared storage or equal).
bool IsTiedCopy(const at::Tensor& lm_head, const at::Tensor& embed) {
  if (lm_head.sizes() != embed.sizes() ||
      lm_head.scalar_type() != embed.scalar_type()) {
    return false;
  }
  return lm_head.data_ptr() == embed.data_ptr() || at::equal(lm_head, embed);
}

absl::Status CopyTokenizerFiles(const std::string& from,
                                const std::string& to) {
  for (const std::string& name : HfTokenizerFiles()) {
    const std::string src = Join(from, name);
    if (!fs::exists(src)) continue;
    std::error_code ec;
    fs::copy_file(src, Join(to, name), fs::copy_options::overwrite_existing,
                  ec);
    if (ec) return FsError("cannot copy tokenizer file", src, ec);
    VERL_RETURN_IF_ERROR(core::FsyncPath(Join(to, name)));
  }
  return absl::OkStatus();
}

// Moves the complete folder `tmp` to `dir`, replacing an existing `dir` by
// an atomic exchange (renameat2) or, where unsupported, by two renames.
absl::Status Publish(const std::string& tmp, const std::string& dir,
                     bool overwrite) {
  const bool exists = fs::exists(dir);
  if (exists && !overwrite) {
    return absl::AlreadyExistsError(absl::StrCat(dir, ": already exists"));
  }
  if (!exists) {
    if (::rename(tmp.c_str(), dir.c_str()) != 0) {
      return absl::InternalError(
          absl::StrCat(dir, ": rename failed: ", std::strerror(errno)));
    }
  } else if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(),
                         RENAME_EXCHANGE) != 0) {
    // Fallback: move the old folder aside, then the new one in.
    const std::string old = TempSibling(dir, "old");
    if (::rename(dir.c_str(), old.c_str()) != 0 ||
        ::rename(tmp.c_str(), dir.c_str()) != 0) {
      return absl::InternalError(
          absl::StrCat(dir, ": rename failed: ", std::strerror(errno)));
    }
    std::error_code ec;
    fs::remove_all(old, ec);
  } else {
    std::error_code ec;
    fs::remove_all(tmp, ec);  // now holds the previous folder
    if (ec) return FsError("cannot remove previous folder", tmp, ec);
  }
  std::string parent = fs::path(dir).parent_path().string();
  return core::FsyncPath(parent.empty() ? "." : parent);
}

absl::Status WriteFolder(const std::string& dir, const HfCheckpoint& ckpt,
                         const HfSaveOptions& options) {
  VERL_RETURN_IF_ERROR(
      WriteHfConfig(Join(dir, kConfigFile), ckpt.config, ckpt.config_json));
  if (ckpt.generation.has_value()) {
    VERL_RETURN_IF_ERROR(WriteGenerationConfig(
        Join(dir, kGenerationFile), *ckpt.generation, ckpt.generation_json));
  }
  const ckpt::TensorMap* tensors = &ckpt.tensors;
  ckpt::TensorMap untied;
  auto head = ckpt.tensors.find(kLmHeadName);
  auto embed = ckpt.tensors.find(kEmbedName);
  if (ckpt.config.tie_word_embeddings && head != ckpt.tensors.end() &&
      embed != ckpt.tensors.end() && IsTiedCopy(head->second, embed->second)) {
    untied = ckpt.tensors;
    untied.erase(kLmHeadName);
    tensors = &untied;
  }
  VERL_RETURN_IF_ERROR(
      ckpt::SaveSafetensorsFolder(dir, *tensors, options.max_shard_size));
  if (!options.tokenizer_source_dir.empty()) {
    VERL_RETURN_IF_ERROR(CopyTokenizerFiles(options.tokenizer_source_dir, dir));
  }
  return core::FsyncPath(dir);
}

}  // namespace

const std::vector<std::string>& HfTokenizerFiles() {
  static const auto* files = new std::vector<std::string>{
      "tokenizer.json",   "tokenizer_config.json",   "vocab.json",
      "merges.txt",       "special_tokens_map.json", "chat_template.jinja",
      "added_tokens.json"};
  return *files;
}

absl::StatusOr<HfCheckpoint> LoadHfConfigs(const std::string& dir) {
  HfCheckpoint ckpt;
  VERL_ASSIGN_OR_RETURN(
      ckpt.config, ReadHfConfig(Join(dir, kConfigFile), &ckpt.config_json));
  const std::string gen = Join(dir, kGenerationFile);
  if (fs::exists(gen)) {
    VERL_ASSIGN_OR_RETURN(ckpt.generation,
                          ReadGenerationConfig(gen, &ckpt.generation_json));
  }
  return ckpt;
}

absl::StatusOr<HfCheckpoint> LoadHfCheckpoint(const std::string& dir) {
  VERL_ASSIGN_OR_RETURN(HfCheckpoint ckpt, LoadHfConfigs(dir));
  VERL_ASSIGN_OR_RETURN(ckpt.tensors, ckpt::LoadSafetensorsFolder(dir));
  return ckpt;
}

absl::Status LoadHfWeightsInto(const std::string& dir,
                               std::map<std::string, at::Tensor>* dst,
                               const HfLoadIntoOptions& options) {
  bool tied = false;
  if (fs::exists(Join(dir, kConfigFile))) {
    // Only the tie flag matters here: read it alone so that folders of other
    // architectures (vision-language models) load as well.
    VERL_ASSIGN_OR_RETURN(nlohmann::json config,
                          core::ReadJsonFile(Join(dir, kConfigFile)));
    const auto it = config.find("tie_word_embeddings");
    tied = it != config.end() && it->is_boolean() && it->get<bool>();
  }
  at::NoGradGuard no_grad;
  std::set<std::string> loaded;
  std::vector<std::string> unexpected;
  VERL_RETURN_IF_ERROR(ckpt::ForEachTensorInFolder(
      dir, [&](const std::string& name, const at::Tensor& src) -> absl::Status {
        auto it = dst->find(name);
        if (it == dst->end()) {
          unexpected.push_back(name);
          return absl::OkStatus();
        }
        if (it->second.sizes() != src.sizes()) {
          return absl::InvalidArgumentError(
              absl::StrCat(dir, ": tensor '", name, "' has shape [",
                           absl::StrJoin(src.sizes(), ","), "], expected [",
                           absl::StrJoin(it->second.sizes(), ","), "]"));
        }
        it->second.copy_(src);
        loaded.insert(name);
        return absl::OkStatus();
      }));
  // HF ties the LM head to the embeddings instead of storing it.
  auto head = dst->find(kLmHeadName);
  if (tied && head != dst->end() && loaded.count(kLmHeadName) == 0 &&
      loaded.count(kEmbedName) > 0) {
    const at::Tensor& embed = dst->at(kEmbedName);
    if (head->second.sizes() != embed.sizes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, ": tied lm_head.weight has shape [",
          absl::StrJoin(head->second.sizes(), ","), "], embeddings [",
          absl::StrJoin(embed.sizes(), ","), "]"));
    }
    if (!head->second.is_same(embed)) head->second.copy_(embed);
    loaded.insert(kLmHeadName);
  }
  if (!unexpected.empty() && !options.allow_unexpected) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": unexpected tensors: ", absl::StrJoin(unexpected, ", ")));
  }
  std::vector<std::string> missing;
  for (const auto& [name, t] : *dst) {
    if (loaded.count(name) == 0) missing.push_back(name);
  }
  if (!missing.empty() && !options.allow_missing) {
    return absl::NotFoundError(
        absl::StrCat(dir, ": missing tensors: ", absl::StrJoin(missing, ", ")));
  }
  return absl::OkStatus();
}

absl::Status SaveHfCheckpoint(const std::string& dir, const HfCheckpoint& ckpt,
                              const HfSaveOptions& options) {
  if (!options.overwrite && fs::exists(dir)) {
    return absl::AlreadyExistsError(absl::StrCat(dir, ": already exists"));
  }
  const std::string parent = fs::path(dir).parent_path().string();
  if (!parent.empty()) VERL_RETURN_IF_ERROR(core::MakeDirs(parent));
  const std::string tmp = TempSibling(dir, "tmp");
  std::error_code ec;
  fs::create_directory(tmp, ec);
  if (ec) return FsError("cannot create", tmp, ec);
  absl::Status status = WriteFolder(tmp, ckpt, options);
  if (status.ok()) status = Publish(tmp, dir, options.overwrite);
  if (!status.ok()) fs::remove_all(tmp, ec);
  return status;
}

}  // namespace verl::models
