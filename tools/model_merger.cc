// File: tools/model_merger.cc
//
// verl's `python -m verl.model_merger {merge|test}` for this project's (and
// plain-tensor PyTorch) FSDP checkpoints and its Megatron dist_ckpt ones:
//
//   model_merger merge --backend fsdp --target_dir out/hf
//       --local_dir ckpts/global_step_10/actor [--dtype bf16]
//   model_merger test --backend fsdp --local_dir ... --test_hf_dir ref/hf
//   model_merger merge --backend megatron --local_dir .../actor
//       --target_dir out/hf [--tie-word-embedding] [--is-value-model]
//
// verl's dashed spellings (--tie-word-embedding, --is-value-model,
// --use-cpu-initialization, --trust-remote-code) are accepted. Errors print
// one line naming the file and exit 1; a bad command line exits 2; `test`
// exits 1 when the merged tensors differ from the reference.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "verl/ckpt/gguf/gguf.h"
#include "verl/ckpt/merger/checkpoint_merger.h"
#include "verl/core/main_guard.h"
#include "verl/models/gguf_export.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/megatron/megatron_merger.h"

ABSL_FLAG(std::string, backend, "", "fsdp or megatron (required).");
ABSL_FLAG(std::string, local_dir, "",
          "The role folder of a checkpoint: .../global_step_N/actor.");
ABSL_FLAG(std::string, target_dir, "tmp", "HF folder to write (merge).");
ABSL_FLAG(std::string, hf_model_path, "",
          "Config/tokenizer source when local_dir/huggingface has none.");
ABSL_FLAG(bool, tie_word_embedding, false,
          "Leave lm_head.weight out (tied to the embeddings).");
ABSL_FLAG(
    bool, is_value_model, false,
    "Megatron: the checkpoint is a value model (output_layer -> score.*); "
    "no effect for fsdp.");
ABSL_FLAG(bool, use_cpu_initialization, false,
          "Accepted for verl compatibility (merging always runs on CPU).");
ABSL_FLAG(bool, trust_remote_code, false, "Accepted for verl compatibility.");
ABSL_FLAG(std::string, mesh_dim_names, "",
          "Override fsdp_config.json's mesh dim names: 'fsdp' or 'ddp,fsdp'.");
ABSL_FLAG(std::string, dtype, "bf16", "Output dtype: bf16, fp16 or fp32.");
ABSL_FLAG(std::string, max_shard_size, "5GB",
          "Largest safetensors shard (e.g. 5GB, 500MB, 2GiB).");
ABSL_FLAG(std::string, test_hf_dir, "", "Reference HF folder (test mode).");
ABSL_FLAG(int, num_threads, 8, "Threads loading shard files.");
ABSL_FLAG(bool, merge_lora, false,
          "LoRA checkpoints: write the full model with the adapters folded in "
          "(W + lora_alpha/r * B @ A); lora_adapter/ is written either way.");
ABSL_FLAG(double, lora_alpha, 0, "LoRA alpha for --merge_lora (required).");
ABSL_FLAG(bool, overwrite, false,
          "Replace an existing non-empty --target_dir (its files are "
          "deleted); without it such a folder is refused.");
ABSL_FLAG(std::string, hf_upload_path, "",
          "Not supported (no network access).");
ABSL_FLAG(std::string, output_format, "hf",
          "hf (verl's safetensors folder) or gguf (this project's addition: "
          "<target_dir>/model.gguf for llama.cpp, via an fp32 merge)");
ABSL_FLAG(std::string, gguf_outtype, "f32",
          "GGUF weight type with --output_format=gguf: f32 | f16 | bf16 | "
          "q8_0");

namespace {

// verl spells some flags with dashes; absl flag names cannot have them.
std::vector<char*> Undash(int argc, char** argv,
                          std::vector<std::string>& own) {
  own.assign(argv, argv + argc);
  std::vector<char*> out;
  for (std::string& arg : own) {
    if (arg.rfind("--", 0) == 0) {
      const size_t eq = arg.find('=');
      for (size_t i = 2; i < std::min(eq, arg.size()); ++i) {
        if (arg[i] == '-') arg[i] = '_';
      }
    }
    out.push_back(arg.data());
  }
  return out;
}

int Fail(const std::string& message, int code = 1) {
  std::cerr << "model_merger: " << message << std::endl;
  return code;
}

}  // namespace

static int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "model_merger merge|test --backend fsdp|megatron --local_dir DIR "
      "[--target_dir DIR | --test_hf_dir DIR] [flags]");
  std::vector<std::string> own;
  std::vector<char*> args = Undash(argc, argv, own);
  std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (positional.size() != 2 || (std::string(positional[1]) != "merge" &&
                                 std::string(positional[1]) != "test")) {
    return Fail("expected one command, merge or test", 2);
  }
  const std::string command = positional[1];
  const std::string backend = absl::GetFlag(FLAGS_backend);
  if (backend != "fsdp" && backend != "megatron") {
    return Fail("--backend must be fsdp or megatron", 2);
  }
  const bool megatron = backend == "megatron";
  if (megatron && !absl::GetFlag(FLAGS_mesh_dim_names).empty()) {
    return Fail("--mesh_dim_names is an fsdp flag", 2);
  }
  if (megatron && absl::GetFlag(FLAGS_merge_lora)) {
    return Fail("--merge_lora: Megatron LoRA checkpoints are not built", 2);
  }
  if (absl::GetFlag(FLAGS_local_dir).empty()) {
    return Fail("--local_dir is required", 2);
  }
  if (!absl::GetFlag(FLAGS_hf_upload_path).empty()) {
    return Fail("--hf_upload_path is not supported (no network access)", 2);
  }

  verl::ckpt::MergeOptions options;
  options.local_dir = absl::GetFlag(FLAGS_local_dir);
  options.target_dir = absl::GetFlag(FLAGS_target_dir);
  options.hf_model_path = absl::GetFlag(FLAGS_hf_model_path);
  options.tie_word_embedding = absl::GetFlag(FLAGS_tie_word_embedding);
  options.is_value_model = absl::GetFlag(FLAGS_is_value_model);
  options.num_threads = absl::GetFlag(FLAGS_num_threads);
  options.merge_lora = absl::GetFlag(FLAGS_merge_lora);
  options.lora_alpha = absl::GetFlag(FLAGS_lora_alpha);
  options.overwrite = absl::GetFlag(FLAGS_overwrite);
  options.extra_hf_files = verl::models::HfTokenizerFiles();
  if (!absl::GetFlag(FLAGS_mesh_dim_names).empty()) {
    std::vector<std::string> names =
        absl::StrSplit(absl::GetFlag(FLAGS_mesh_dim_names), ',');
    options.mesh_dim_names = names;
  }
  auto dtype = verl::ckpt::ParseMergeDtype(absl::GetFlag(FLAGS_dtype));
  if (!dtype.ok()) return Fail(std::string(dtype.status().message()), 2);
  options.dtype = *dtype;
  auto shard = verl::ckpt::ParseByteSize(absl::GetFlag(FLAGS_max_shard_size));
  if (!shard.ok()) return Fail(std::string(shard.status().message()), 2);
  options.max_shard_size = *shard;

  const std::string format = absl::GetFlag(FLAGS_output_format);
  if (format != "hf" && format != "gguf") {
    return Fail("--output_format must be hf or gguf", 2);
  }
  std::string gguf_path;
  verl::models::GgufExportOptions gguf;
  if (format == "gguf") {
    if (command == "test") {
      return Fail("test compares HF folders; --output_format=gguf is for merge",
                  2);
    }
    if (absl::GetFlag(FLAGS_dtype) != "bf16") {
      return Fail(
          "--dtype does not apply to --output_format=gguf (the merge is fp32; "
          "pick the GGUF type with --gguf_outtype)",
          2);
    }
    auto type = verl::ckpt::ParseGgmlType(absl::GetFlag(FLAGS_gguf_outtype));
    if (!type.ok()) return Fail(std::string(type.status().message()), 2);
    gguf.type = *type;
    gguf.name =
        std::filesystem::path(options.target_dir).lexically_normal().filename();
    gguf_path = options.target_dir + "/model.gguf";
    if (std::filesystem::exists(gguf_path) && !options.overwrite) {
      return Fail(gguf_path + " exists (pass --overwrite to replace it)");
    }
    options.dtype = at::kFloat;
    options.overwrite = false;
  }

  std::string merged_dir = options.target_dir;
  if (command == "test" || format == "gguf") {
    if (command == "test" && absl::GetFlag(FLAGS_test_hf_dir).empty()) {
      return Fail("test needs --test_hf_dir", 2);
    }
    char tmpl[] = "/tmp/model_merger_test_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) return Fail("cannot create a temp folder");
    merged_dir = std::string(tmpl) + "/merged";
    options.target_dir = merged_dir;
  }
  // The temporary folder of test mode and of the GGUF path goes either way.
  auto remove_temp = [&] {
    if (merged_dir == absl::GetFlag(FLAGS_target_dir)) return;
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(merged_dir).parent_path(),
                                ec);
  };
  absl::StatusOr<verl::ckpt::MergeStats> stats =
      megatron ? verl::models::MergeMegatronCheckpoint(options)
               : verl::ckpt::MergeFsdpCheckpoint(options);
  if (!stats.ok()) {
    remove_temp();
    return Fail(std::string(stats.status().message()));
  }
  if (format == "gguf") {
    std::error_code ec;
    std::filesystem::create_directories(absl::GetFlag(FLAGS_target_dir), ec);
    absl::Status exported =
        verl::models::ExportHfFolderToGguf(merged_dir, gguf_path, gguf);
    remove_temp();
    if (!exported.ok()) return Fail(std::string(exported.message()));
    std::cerr << "merged " << stats->num_tensors << " tensors from "
              << stats->num_shard_files << " shard files into " << gguf_path
              << std::endl;
    return 0;
  }
  std::cerr << "merged " << stats->num_tensors << " tensors from "
            << stats->num_shard_files << " shard files (world size "
            << stats->world_size << ") into " << options.target_dir
            << (stats->num_lora_tensors > 0
                    ? absl::StrCat(" (+", stats->num_lora_tensors,
                                   " LoRA tensors in lora_adapter/)")
                    : "")
            << std::endl;
  if (command == "merge") return 0;

  // verl's tolerances: fsdp atol = rtol = 1e-6; megatron atol 1e-2,
  // rtol 5e-2 (its merger test).
  auto report = verl::ckpt::CompareHfFolders(
      merged_dir, absl::GetFlag(FLAGS_test_hf_dir), megatron ? 1e-2 : 1e-6,
      megatron ? 5e-2 : 1e-6);
  remove_temp();
  if (!report.ok()) return Fail(std::string(report.status().message()));
  for (const std::string& line : report->mismatches) {
    std::cerr << "mismatch: " << line << std::endl;
  }
  std::cout << (report->ok() ? "PASS" : "FAIL") << ": " << report->num_tensors
            << " tensors compared, " << report->mismatches.size()
            << " mismatches, max abs diff " << report->max_abs_diff
            << std::endl;
  return report->ok() ? 0 : 1;
}

int main(int argc, char** argv) {
  return verl::core::GuardMain("model_merger",
                               [&] { return Main(argc, argv); });
}
