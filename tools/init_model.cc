// init_model: writes a built-in preset with seeded random weights and the
// built-in tokenizer as an HF folder, e.g. to try the export, the engine or a
// benchmark on a model of a given shape without a download.
//
//   bazel run //tools:init_model -- --preset=tiny-qwen2 --output_dir=/tmp/m
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/core/main_guard.h"
#include "verl/core/status.h"
#include "verl/models/decoder.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

ABSL_FLAG(std::string, preset, "tiny-qwen2", "model preset");
ABSL_FLAG(uint64_t, seed, 0, "weight init seed");
ABSL_FLAG(std::string, output_dir, "", "HF folder to create (must not exist)");
ABSL_FLAG(int64_t, vocab_size, 0,
          "model vocabulary (0: the built-in tokenizer's; larger pads the "
          "embedding as Qwen's 151936 does)");
ABSL_FLAG(int64_t, num_kv_heads, 0, "key/value heads (0: the preset's)");

namespace {

absl::Status Run() {
  const std::string out = absl::GetFlag(FLAGS_output_dir);
  if (out.empty())
    return absl::InvalidArgumentError("--output_dir is required");
  verl::models::Tokenizer tokenizer = verl::models::MakeBuiltinTokenizer();
  const int64_t vocab = absl::GetFlag(FLAGS_vocab_size);
  if (vocab != 0 && vocab < tokenizer.vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--vocab_size=", vocab, " is below the tokenizer's ",
                     tokenizer.vocab_size(), " tokens"));
  }
  VERL_ASSIGN_OR_RETURN(
      verl::models::ModelConfig config,
      verl::models::MakePreset(absl::GetFlag(FLAGS_preset),
                               vocab > 0 ? vocab : tokenizer.vocab_size()));
  config.eos_token_ids = {tokenizer.eos_token_id()};
  const int64_t kv = absl::GetFlag(FLAGS_num_kv_heads);
  if (kv < 0 || (kv > 0 && config.num_attention_heads % kv != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num_kv_heads=", kv, " does not divide the ",
                     config.num_attention_heads, " attention heads"));
  }
  if (kv > 0) config.num_key_value_heads = kv;
  auto model = verl::models::CreateModel(config, absl::GetFlag(FLAGS_seed));
  verl::models::HfCheckpoint ckpt;
  ckpt.config = config;
  for (const auto& item : model->named_parameters()) {
    ckpt.tensors[item.key()] = item.value().detach();
  }
  const std::string tok_dir = out + ".tokenizer.tmp";
  VERL_RETURN_IF_ERROR(tokenizer.SaveToDirectory(tok_dir));
  verl::models::HfSaveOptions options;
  options.tokenizer_source_dir = tok_dir;
  options.overwrite = false;  // never replace a user's folder
  absl::Status saved = verl::models::SaveHfCheckpoint(out, ckpt, options);
  std::error_code ec;
  std::filesystem::remove_all(tok_dir, ec);
  VERL_RETURN_IF_ERROR(saved);
  std::cout << "init_model: wrote " << absl::GetFlag(FLAGS_preset) << " to "
            << out << "\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = absl::StrCat(
      "Writes a built-in model preset (random weights, built-in tokenizer) as "
      "an HF folder.\n  init_model --preset=NAME --output_dir=DIR "
      "[--vocab_size=V] [--num_kv_heads=K]\npresets: ",
      absl::StrJoin(verl::models::PresetNames(), ", "));
  return verl::core::RunToolMain(argc, argv, "init_model", usage, Run);
}
