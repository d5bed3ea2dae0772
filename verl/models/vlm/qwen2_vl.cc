// File: verl/models/vlm/qwen2_vl.cc
#include "verl/models/vlm/qwen2_vl.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/tensor.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "verl/models/attention.h"

namespace verl::models::vlm {

absl::StatusOr<RopeIndexResult> RopeIndex(const std::vector<int64_t>& ids,
                                          const std::vector<GridThw>& grids,
                                          const VlmConfig& config,
                                          bool pads_after_images_are_text) {
  const int64_t m = config.vision.spatial_merge_size;
  const int64_t n = ids.size();
  std::vector<int64_t> rows[3];
  for (auto& r : rows) r.reserve(n);
  int64_t next = 0;  // first position of the next text run
  int64_t st = 0;
  auto add_text = [&](int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      for (auto& r : rows) r.push_back(next + i);
    }
    next += len;
  };
  for (size_t g = 0; g < grids.size(); ++g) {
    const auto it =
        std::find(ids.begin() + st, ids.end(), config.image_token_id);
    if (it == ids.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence has fewer <|image_pad|> runs than its ",
                       grids.size(), " images"));
    }
    const int64_t ed = it - ids.begin();
    add_text(ed - st);
    const auto [t, h, w] = grids[g];
    const int64_t lh = h / m, lw = w / m, tokens = t * lh * lw;
    if (ed + tokens > n ||
        std::any_of(ids.begin() + ed, ids.begin() + ed + tokens,
                    [&](int64_t id) { return id != config.image_token_id; })) {
      return absl::InvalidArgumentError(absl::StrCat(
          "image ", g, " (grid ", t, "x", h, "x", w, ") needs ", tokens,
          " consecutive <|image_pad|> tokens at position ", ed));
    }
    // Images: temporal index 0 (second_per_grid_t = 0 in HF).
    int64_t max_pos = next;
    for (int64_t f = 0; f < t; ++f) {
      for (int64_t r = 0; r < lh; ++r) {
        for (int64_t c = 0; c < lw; ++c) {
          rows[0].push_back(next);
          rows[1].push_back(next + r);
          rows[2].push_back(next + c);
          max_pos = std::max({max_pos, next + r, next + c});
        }
      }
    }
    next = max_pos + 1;
    st = ed + tokens;
  }
  if (!pads_after_images_are_text &&
      std::find(ids.begin() + st, ids.end(), config.image_token_id) !=
          ids.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence has more <|image_pad|> tokens than its ",
                     grids.size(), " images need"));
  }
  add_text(n - st);
  std::vector<int64_t> flat;
  for (auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  RopeIndexResult out;
  out.position_ids = at::tensor(flat, at::kLong).reshape({3, n});
  out.delta = next - n;
  return out;
}

Qwen2VLForConditionalGeneration::Qwen2VLForConditionalGeneration(
    const VlmConfig& config)
    : CausalLM(config.text), vlm_config_(config) {
  visual =
      register_module("visual", std::make_shared<VisionTower>(config.vision));
}

absl::StatusOr<Qwen2VLForConditionalGeneration::Inputs>
Qwen2VLForConditionalGeneration::PrepareInputs(
    const at::Tensor& input_ids, const std::vector<int64_t>& cu_seqlens,
    const at::Tensor& pixel_values, const at::Tensor& image_grid_thw,
    const std::vector<int64_t>& images_per_sequence) {
  if (input_ids.dim() != 1 || cu_seqlens.size() < 2 || cu_seqlens[0] != 0 ||
      cu_seqlens.back() != input_ids.size(0)) {
    return absl::InvalidArgumentError(
        "input_ids must be packed [T] with cu_seqlens from 0 to T");
  }
  const bool counted = !images_per_sequence.empty();
  if (counted && images_per_sequence.size() + 1 != cu_seqlens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("images_per_sequence has ", images_per_sequence.size(),
                     " entries for ", cu_seqlens.size() - 1, " sequences"));
  }
  const std::vector<GridThw> grids = image_grid_thw.defined()
                                         ? GridsFromTensor(image_grid_thw)
                                         : std::vector<GridThw>{};
  at::Tensor ids_cpu = input_ids.to(at::kLong).cpu().contiguous();
  const int64_t* ids = ids_cpu.data_ptr<int64_t>();
  const int64_t merge = vlm_config_.vision.MergeUnit();

  // Positions per sequence, each consuming its images in order. An image's
  // pads are the sequence's first pads (RopeIndex takes the runs in order);
  // with counts given, pads after the last image (e.g. sampled in a
  // response) are text tokens, as the rollout engine embeds them.
  std::vector<at::Tensor> positions;
  std::vector<uint8_t> image_slot(input_ids.size(0), 0);
  size_t next_image = 0;
  int64_t image_tokens = 0;
  for (size_t s = 0; s + 1 < cu_seqlens.size(); ++s) {
    std::vector<int64_t> seq(ids + cu_seqlens[s], ids + cu_seqlens[s + 1]);
    std::vector<GridThw> seq_grids;
    int64_t covered = 0;
    if (counted) {
      for (int64_t k = 0; k < images_per_sequence[s]; ++k) {
        if (next_image == grids.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("images_per_sequence names more than the ",
                           grids.size(), " images given"));
        }
        const auto& g = grids[next_image++];
        seq_grids.push_back(g);
        covered += g[0] * g[1] * g[2] / merge;
      }
    } else {
      const int64_t pads =
          std::count(seq.begin(), seq.end(), vlm_config_.image_token_id);
      while (covered < pads && next_image < grids.size()) {
        const auto& g = grids[next_image++];
        seq_grids.push_back(g);
        covered += g[0] * g[1] * g[2] / merge;
      }
      covered = pads;  // more pads than images cover: RopeIndex refuses
    }
    auto index = RopeIndex(seq, seq_grids, vlm_config_, counted);
    if (!index.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s, ": ", index.status().message()));
    }
    positions.push_back(index->position_ids);
    for (int64_t t = cu_seqlens[s], marked = 0;
         t < cu_seqlens[s + 1] && marked < covered; ++t) {
      if (ids[t] != vlm_config_.image_token_id) continue;
      image_slot[t] = 1;
      ++marked;
    }
    image_tokens += covered;
  }
  if (next_image != grids.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(grids.size(),
                     " images given but the sequences' <|image_pad|> tokens "
                     "cover only ",
                     next_image));
  }
  Inputs out;
  out.position_ids = at::cat(positions, 1).to(input_ids.device());
  out.embeds = model->embed_tokens->Forward(input_ids);
  if (!grids.empty()) {
    if (!pixel_values.defined()) {
      return absl::InvalidArgumentError("image_grid_thw without pixel_values");
    }
    int64_t patches = 0;
    for (const auto& g : grids) patches += g[0] * g[1] * g[2];
    if (pixel_values.dim() != 2 || pixel_values.size(0) != patches ||
        pixel_values.size(1) != vlm_config_.vision.PatchDim()) {
      return absl::InvalidArgumentError(
          absl::StrCat("pixel_values must be [", patches, ", ",
                       vlm_config_.vision.PatchDim(), "] for image_grid_thw"));
    }
    // The tower follows the model's gradient checkpointing flag (what
    // enable_gradient_checkpointing set, e.g. from verl's
    // actor_rollout_ref.model.enable_gradient_checkpointing).
    visual->enable_gradient_checkpointing(gradient_checkpointing());
    at::Tensor image_embeds = visual->Forward(pixel_values, grids);
    CHECK_EQ(image_embeds.size(0), image_tokens);
    at::Tensor mask = at::tensor(image_slot, at::kByte)
                          .to(at::kBool)
                          .to(input_ids.device())
                          .unsqueeze(-1);
    out.embeds = out.embeds.masked_scatter(
        mask.expand_as(out.embeds), image_embeds.to(out.embeds.scalar_type()));
  } else if (image_tokens > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(image_tokens, " <|image_pad|> tokens but no images"));
  }
  return out;
}

absl::StatusOr<ForwardOutput>
Qwen2VLForConditionalGeneration::ForwardMultimodal(
    const at::Tensor& input_ids, const std::vector<int64_t>& cu_seqlens,
    const at::Tensor& pixel_values, const at::Tensor& image_grid_thw) {
  auto inputs =
      PrepareInputs(input_ids, cu_seqlens, pixel_values, image_grid_thw);
  if (!inputs.ok()) return inputs.status();
  // Owned by the backward graph too: gradient checkpointing recomputes the
  // layers with it after this returns.
  auto attention =
      std::make_shared<VarlenCausalAttention>(cu_seqlens, LayerWindows());
  at::Tensor hidden =
      ForwardEmbeds(inputs->embeds, inputs->position_ids, attention);
  ForwardOutput out;
  out.logits = Logits(hidden);
  return out;
}

void Qwen2VLForConditionalGeneration::FreezeVisionTower(bool freeze) {
  for (at::Tensor& p : visual->parameters()) p.set_requires_grad(!freeze);
}

std::shared_ptr<Qwen2VLForConditionalGeneration> CreateVlmModel(
    const VlmConfig& config, uint64_t seed, double init_std) {
  auto model = std::make_shared<Qwen2VLForConditionalGeneration>(config);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::NoGradGuard no_grad;
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    at::Tensor p = item.value();
    const bool is_norm = name.find("norm") != std::string::npos &&
                         name.find("weight") != std::string::npos;
    const bool is_ln_q = name.find("ln_q.weight") != std::string::npos;
    const bool is_bias =
        name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (is_norm || is_ln_q) {
      p.fill_(1.0);
    } else if (is_bias) {
      p.zero_();
    } else {
      p.normal_(0.0, init_std, gen);
    }
  }
  return model;
}

}  // namespace verl::models::vlm
