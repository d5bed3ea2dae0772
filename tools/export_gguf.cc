// export_gguf: an HF model folder -> one GGUF file for llama.cpp and the
// servers built on it (see docs/checkpoints.md#gguf-export).
//
//   bazel run //tools:export_gguf -- --hf_dir=/models/qwen --output=q.gguf
//       --outtype=q8_0
//
// Dense Llama / Mistral / Qwen2 / Qwen3 with a byte-level BPE tokenizer;
// --outtype f32 (default), f16, bf16 or q8_0. Anything else is refused with
// one line before a byte is written; the file appears atomically.
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "verl/ckpt/gguf/gguf.h"
#include "verl/core/main_guard.h"
#include "verl/core/status.h"
#include "verl/models/gguf_export.h"

ABSL_FLAG(std::string, hf_dir, "",
          "HF model folder (config.json, weights, "
          "tokenizer.json)");
ABSL_FLAG(std::string, output, "", "GGUF file to write");
ABSL_FLAG(std::string, outtype, "f32", "f32 | f16 | bf16 | q8_0");
ABSL_FLAG(std::string, name, "", "general.name (default: the folder's name)");

namespace {

absl::Status Run() {
  const std::string dir = absl::GetFlag(FLAGS_hf_dir);
  const std::string out = absl::GetFlag(FLAGS_output);
  if (dir.empty() || out.empty()) {
    return absl::InvalidArgumentError("--hf_dir and --output are required");
  }
  verl::models::GgufExportOptions options;
  VERL_ASSIGN_OR_RETURN(
      options.type, verl::ckpt::ParseGgmlType(absl::GetFlag(FLAGS_outtype)));
  options.name = absl::GetFlag(FLAGS_name);
  VERL_RETURN_IF_ERROR(verl::models::ExportHfFolderToGguf(dir, out, options));
  std::cout << "export_gguf: wrote " << out << " ("
            << absl::GetFlag(FLAGS_outtype) << ")\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return verl::core::RunToolMain(
      argc, argv, "export_gguf",
      "Writes an HF model folder as a GGUF file for llama.cpp.\n"
      "  export_gguf --hf_dir=DIR --output=FILE.gguf "
      "[--outtype=f32|f16|bf16|q8_0]",
      Run);
}
