// File: verl/models/gguf_export.h
//
// HF folder -> GGUF for llama.cpp (what convert_hf_to_gguf.py writes for the
// dense Llama, Mistral, Qwen2 and Qwen3 families): llama.cpp's architecture
// name and hyper-parameter keys, the byte-level BPE tokenizer (tokens,
// token types, merges, pre-tokenizer name, special ids, chat template) and
// llama.cpp's tensor names. Llama/Mistral q/k rows are permuted from HF's
// rotate-half layout back to the interleaved one llama.cpp's "llama" rope
// expects (as the converter does); Qwen uses NeoX rope and is not permuted.
// 2-D weights take the requested type; norms and biases stay f32.
// Llama-3 rope scaling becomes the converter's rope_freqs tensor.
// Unsupported inputs (MoE, other rope scaling, SentencePiece tokenizers, an
// unknown pre-tokenizer) are refused before anything is written; the file
// appears atomically.
#ifndef VERL_MODELS_GGUF_EXPORT_H_
#define VERL_MODELS_GGUF_EXPORT_H_

#include <string>

#include "absl/status/status.h"
#include "verl/ckpt/gguf/gguf.h"

namespace verl::models {

struct GgufExportOptions {
  ckpt::GgmlType type = ckpt::GgmlType::kF32;
  std::string name;  // general.name (default: the folder's name)
};

absl::Status ExportHfFolderToGguf(const std::string& hf_dir,
                                  const std::string& gguf_path,
                                  const GgufExportOptions& options = {});

}  // namespace verl::models

#endif  // VERL_MODELS_GGUF_EXPORT_H_
