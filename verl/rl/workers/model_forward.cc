#include "verl/rl/workers/model_forward.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <glog/logging.h>
#include <torch/types.h>

#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/models/attention.h"
#include "verl/models/logprob.h"
#include "verl/models/padding.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_processor.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/megatron/pipeline_schedule.h"
#include "verl/parallel/megatron/vocab_parallel.h"
#include "verl/parallel/ulysses.h"
#include "verl/profiler/profile_scope.h"

namespace verl::rl {
namespace {

// Attention of a sequence-sharded forward: q/k/v of this rank's tokens are
// all-to-all'ed to all tokens x this rank's heads, attended over the whole
// packed stream (`cu_seqlens` of all ranks' tokens), and switched back.
// K/V heads are repeated when there are fewer than sp of them (verl's
// repeat_kv; needs sp % n_kv_heads == 0).
class UlyssesAttention : public models::AttentionBackend {
 public:
  UlyssesAttention(std::shared_ptr<parallel::Communicator> sp,
                   std::vector<int64_t> cu_seqlens,
                   std::vector<int64_t> layer_windows)
      : sp_(std::move(sp)),
        inner_(std::move(cu_seqlens), std::move(layer_windows)) {}

  at::Tensor Attend(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                    const at::Tensor& v) override {
    const int64_t n = sp_->size(), n_kv = k.size(1);
    CHECK_EQ(q.size(1) % n, 0)
        << "ulysses_sequence_parallel_size=" << n << " does not divide "
        << q.size(1) << " attention heads";
    at::Tensor kr = k, vr = v;
    if (n_kv % n != 0) {
      CHECK_EQ(n % n_kv, 0)
          << "ulysses_sequence_parallel_size=" << n << " and " << n_kv
          << " key/value heads: one must divide the other";
      kr = k.repeat_interleave(n / n_kv, 1);
      vr = v.repeat_interleave(n / n_kv, 1);
    }
    at::Tensor o = inner_.Attend(layer, parallel::SeqToHeads(q, sp_),
                                 parallel::SeqToHeads(kr, sp_),
                                 parallel::SeqToHeads(vr, sp_));
    return parallel::HeadsToSeq(o, sp_);
  }

 private:
  std::shared_ptr<parallel::Communicator> sp_;
  models::VarlenCausalAttention inner_;
};

}  // namespace

namespace {

// Rows' multi_modal_inputs values (null: no images) as one ImageInputs.
absl::StatusOr<ImageInputs> ImageInputsOf(
    const std::vector<nlohmann::json>& rows) {
  VERL_ASSIGN_OR_RETURN(models::vlm::MultiModalInputs mm,
                        models::vlm::ConcatMultiModalInputs(rows));
  ImageInputs out{mm.pixel_values, mm.image_grid_thw, {}};
  out.images_per_row.reserve(rows.size());
  for (const nlohmann::json& row : rows) {
    // ConcatMultiModalInputs validated each non-null value.
    out.images_per_row.push_back(
        row.is_null() ? 0 : static_cast<int64_t>(row["image_grid_thw"].size()));
  }
  return out;
}

// The images of `rows` of `batch` (in that order).
absl::StatusOr<ImageInputs> ImageInputsOfRows(
    const core::Batch& batch, const std::vector<int64_t>& rows) {
  if (!batch.HasNonTensor("multi_modal_inputs")) return ImageInputs{};
  const std::vector<nlohmann::json>& all =
      batch.non_tensor("multi_modal_inputs");
  std::vector<nlohmann::json> picked;
  picked.reserve(rows.size());
  for (int64_t r : rows) picked.push_back(all[r]);
  return ImageInputsOf(picked);
}

}  // namespace

absl::StatusOr<ImageInputs> BatchImageInputs(const core::Batch& batch) {
  if (!batch.HasNonTensor("multi_modal_inputs")) return ImageInputs{};
  return ImageInputsOf(batch.non_tensor("multi_modal_inputs"));
}

UlyssesSlice SliceForSequenceParallel(const models::CausalLM& model,
                                      const at::Tensor& ids,
                                      const at::Tensor& pos,
                                      std::vector<int64_t> cu_seqlens,
                                      const SequenceParallel& sp) {
  const int64_t n = sp.group->size(), total = ids.size(0);
  UlyssesSlice s;
  s.size = (total + n - 1) / n;
  const int64_t pad = s.size * n - total;
  at::Tensor all_ids = ids, all_pos = pos;
  if (pad > 0) {
    cu_seqlens.push_back(s.size * n);
    all_ids = at::cat({ids, at::zeros({pad}, ids.options())});
    all_pos = at::cat({pos, at::arange(pad, pos.options())});
  }
  s.lo = sp.group->rank() * s.size;
  s.attention = std::make_shared<UlyssesAttention>(
      sp.group, std::move(cu_seqlens), model.LayerWindows());
  s.ids = all_ids.narrow(0, s.lo, s.size);
  s.pos = all_pos.narrow(0, s.lo, s.size);
  return s;
}

PackedResponses PackResponses(const at::Tensor& input_ids,
                              const at::Tensor& attention_mask,
                              const at::Tensor& position_ids,
                              int64_t response_length) {
  PackedResponses p;
  p.batch = input_ids.size(0);
  p.length = input_ids.size(1);
  p.response_length = response_length;
  const int64_t prompt_length = p.length - response_length;
  const at::Tensor mask = attention_mask.to(at::kBool);
  p.info = models::Unpad(mask);
  p.ids = models::UnpadTensor(input_ids, p.info);
  p.pos = models::UnpadTensor(position_ids, p.info);

  // Positions P-1 .. L-2 predict response tokens P .. L-1; keep the ones whose
  // target is a real token. Flat indices into [B, L].
  at::Tensor predicts = at::zeros({p.batch, p.length}, at::kBool);
  predicts.narrow(1, prompt_length - 1, response_length)
      .copy_(mask.narrow(1, prompt_length, response_length));
  // The packed row of each real token, so we can select hidden rows.
  at::Tensor packed_row = at::full({p.batch * p.length}, -1, at::kLong);
  packed_row.index_copy_(0, p.info.indices,
                         at::arange(p.info.indices.size(0), at::kLong));
  const at::Tensor flat_src =
      predicts.reshape(-1).nonzero().reshape(-1);  // b*L + t
  p.rows = packed_row.index_select(0, flat_src);   // ascending
  p.targets = input_ids.reshape(-1).index_select(0, flat_src + 1);
  const at::Tensor b = at::div(flat_src, p.length, "floor");
  const at::Tensor r = flat_src - b * p.length - (prompt_length - 1);
  p.dest = b * response_length + r;
  return p;
}

at::Tensor PackedResponses::Scatter(const at::Tensor& values) const {
  at::Tensor full = at::zeros({batch * response_length}, values.options());
  return full.index_copy(0, dest, values).view({batch, response_length});
}

at::Tensor PackedResponses::PromptMean(const at::Tensor& hidden) const {
  const int64_t prompt_length = length - response_length;
  const at::Tensor row_of = at::div(info.indices, length, "floor");
  const at::Tensor col_of = info.indices - row_of * length;
  const at::Tensor keep = (col_of < prompt_length - 1).nonzero().reshape(-1);
  const at::Tensor keep_rows = row_of.index_select(0, keep);
  const at::Tensor sums =
      at::zeros({batch, hidden.size(1)}, hidden.options())
          .index_add(0, keep_rows, hidden.index_select(0, keep));
  const at::Tensor counts =
      at::zeros({batch}, hidden.options())
          .index_add(0, keep_rows,
                     at::ones({keep_rows.size(0)}, hidden.options()));
  return sums / (counts + 1e-8).unsqueeze(1);
}

ResponseForward ForwardResponses(models::CausalLM& model,
                                 const at::Tensor& input_ids,
                                 const at::Tensor& attention_mask,
                                 const at::Tensor& position_ids,
                                 int64_t response_length, double temperature,
                                 bool with_entropy, const SequenceParallel& sp,
                                 const ForwardExtras& extras) {
  CHECK(!(extras.prompt_hidden && sp.enabled()))
      << "prompt_hidden is not available with sequence parallelism";
  const PackedResponses p =
      PackResponses(input_ids, attention_mask, position_ids, response_length);
  const models::UnpadInfo& info = p.info;
  at::Tensor targets = p.targets;

  ResponseForward out;
  at::Tensor selected;
  if (extras.images.defined()) {
    auto* vlm =
        dynamic_cast<models::vlm::Qwen2VLForConditionalGeneration*>(&model);
    CHECK(vlm != nullptr) << "image inputs for a text-only model";
    CHECK(!sp.enabled())
        << "image inputs are not available with sequence parallelism";
    CHECK(!extras.prompt_hidden) << "prompt_hidden with image inputs";
    // Under FSDP the vision tower and the token embeddings live in the root
    // units, which the decoder gathers at its root stage; the image
    // embeddings are computed before the decoder runs, so the root is
    // gathered here first (a no-op when it already is; the decoder's own
    // root stage then finds it gathered).
    if (models::LayerHooks* hooks = model.layer_hooks()) {
      hooks->BeforeForward(models::LayerHooks::kRootStage);
    }
    absl::StatusOr<models::vlm::Qwen2VLForConditionalGeneration::Inputs>
        inputs = vlm->PrepareInputs(
            p.ids, info.cu_seqlens, extras.images.pixel_values,
            extras.images.image_grid_thw, extras.images.images_per_row);
    CHECK(inputs.ok()) << inputs.status().message();
    out.attention = std::make_shared<models::VarlenCausalAttention>(
        info.cu_seqlens, model.LayerWindows());
    const at::Tensor hidden = model.ForwardEmbeds(
        inputs->embeds, inputs->position_ids, *out.attention);
    selected = hidden.index_select(0, p.rows);
  } else if (!sp.enabled()) {
    out.attention = std::make_shared<models::VarlenCausalAttention>(
        info.cu_seqlens, model.LayerWindows());
    const at::Tensor hidden = model.Forward(p.ids, p.pos, *out.attention);
    selected = hidden.index_select(0, p.rows);
    if (extras.prompt_hidden) out.prompt_hidden = p.PromptMean(hidden);
  } else {
    UlyssesSlice s =
        SliceForSequenceParallel(model, p.ids, p.pos, info.cu_seqlens, sp);
    out.attention = s.attention;
    at::Tensor hidden = model.Forward(s.ids, s.pos, *out.attention);
    const at::Tensor mine = (p.rows >= s.lo) & (p.rows < s.lo + s.size);
    targets = targets.masked_select(mine);
    selected = hidden.index_select(0, p.rows.masked_select(mine) - s.lo);
  }

  // Per-token results back to [B, R].
  auto scatter = [&](const at::Tensor& values) { return p.Scatter(values); };
  // Under sp: this rank's tokens' results, gathered in rank (= packed) order.
  auto gather = [&](const at::Tensor& local) {
    if (!sp.enabled()) return local;
    return parallel::GatherSeq(local, sp.group, sp.group->size());
  };
  if (model.config().is_value_model) {
    out.values = scatter(gather(model.Values(selected).to(at::kFloat)));
    return out;
  }
  models::LogProbEntropy lp;
  if (extras.sum_pi_squared) {
    const at::Tensor logits = model.Logits(selected);
    out.sum_pi_squared = scatter(gather(
        models::SumPiSquaredFromLogits(logits, temperature).to(at::kFloat)));
    lp = models::LogProbsAndEntropy(logits, targets, temperature, with_entropy);
  } else {
    // The LM head and the log-prob fused: the [tokens, vocab] logits are
    // walked once each way (models::FusedLinearLogProbs).
    lp = model.LabelLogProbs(selected, targets, temperature, with_entropy);
  }
  if (!with_entropy) {
    out.log_probs = scatter(gather(lp.log_probs));
    return out;
  }
  // One collective for both.
  const at::Tensor both = gather(at::stack({lp.log_probs, lp.entropy}, 1));
  out.log_probs = scatter(both.select(1, 0));
  out.entropy = scatter(both.select(1, 1));
  return out;
}

ResponseForward ForwardResponses(models::MegatronGPTModel& model,
                                 const at::Tensor& input_ids,
                                 const at::Tensor& attention_mask,
                                 const at::Tensor& position_ids,
                                 int64_t response_length, double temperature,
                                 bool with_entropy, const ForwardExtras& extras,
                                 const at::Tensor& stage_output) {
  CHECK(!extras.sum_pi_squared)
      << "sum_pi_squared is not available with strategy=megatron";
  CHECK(!extras.prompt_hidden || !stage_output.defined())
      << "FlowRL's prompt_hidden is not available with pipeline stages";
  const PackedResponses p =
      PackResponses(input_ids, attention_mask, position_ids, response_length);
  // This rank's vocab shard of the logits (or the values) of every token.
  at::Tensor hidden;
  const at::Tensor out =
      stage_output.defined()
          ? stage_output
          : model.Forward(p.ids, p.pos, p.info.cu_seqlens,
                          extras.prompt_hidden ? &hidden : nullptr);
  ResponseForward f;
  if (extras.prompt_hidden) f.prompt_hidden = p.PromptMean(hidden);
  if (model.config().is_value_model) {
    f.values = p.Scatter(out.index_select(0, p.rows).to(at::kFloat));
    return f;
  }
  const parallel::megatron::VocabParallelOutput lp =
      parallel::megatron::VocabParallelLogProbsAndEntropy(
          out.index_select(0, p.rows), p.targets, model.config().vocab_size,
          model.tp(), temperature, with_entropy);
  f.log_probs = p.Scatter(lp.log_probs.to(at::kFloat));
  if (with_entropy) f.entropy = p.Scatter(lp.entropy.to(at::kFloat));
  return f;
}

namespace {

// The micro-batch loop of ForwardBatchNoGrad around any forward pass.
using MicroForward = std::function<ResponseForward(
    const at::Tensor& input_ids, const at::Tensor& attention_mask,
    const at::Tensor& position_ids, int64_t response_length,
    const ImageInputs& images)>;

absl::StatusOr<ResponseForward> ForwardMicroBatches(
    const core::Batch& batch, const MicroBatchOptions& micro, bool value_model,
    bool with_entropy, bool with_sum_pi_squared, const MicroForward& forward) {
  VERL_ASSIGN_OR_RETURN(at::Tensor responses, batch.GetTensor("responses"));
  const int64_t R = responses.size(1);
  VERL_ASSIGN_OR_RETURN(auto micro_rows, MicroBatchIndices(batch, micro));
  at::NoGradGuard no_grad;
  auto zeros = [&] { return torch::zeros({batch.size(), R}, torch::kFloat); };
  ResponseForward out;
  if (value_model) {
    out.values = zeros();
  } else {
    out.log_probs = zeros();
    if (with_entropy) out.entropy = zeros();
    if (with_sum_pi_squared) out.sum_pi_squared = zeros();
  }
  for (const auto& rows : micro_rows) {
    profiler::ProfileScope micro_scope("micro_batch");
    profiler::ProfileScope forward_scope(
        "forward", profiler::MemoryCategory::kActivations);
    at::Tensor idx = torch::tensor(rows, torch::kLong);
    auto take = [&](const char* key) {
      return batch.tensor(key).index_select(0, idx);
    };
    VERL_ASSIGN_OR_RETURN(ImageInputs images, ImageInputsOfRows(batch, rows));
    ResponseForward f = forward(take("input_ids"), take("attention_mask"),
                                take("position_ids"), R, images);
    if (value_model) {
      out.values.index_copy_(0, idx, f.values);
      continue;
    }
    out.log_probs.index_copy_(0, idx, f.log_probs);
    if (with_entropy) out.entropy.index_copy_(0, idx, f.entropy);
    if (with_sum_pi_squared) {
      out.sum_pi_squared.index_copy_(0, idx, f.sum_pi_squared);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<ResponseForward> ForwardBatchNoGrad(
    models::CausalLM& model, const core::Batch& batch,
    const MicroBatchOptions& micro, double temperature, bool with_entropy,
    const SequenceParallel& sp, bool with_sum_pi_squared) {
  model.eval();
  VERL_ASSIGN_OR_RETURN(
      ResponseForward out,
      ForwardMicroBatches(
          batch, micro, model.config().is_value_model, with_entropy,
          with_sum_pi_squared,
          [&](const at::Tensor& ids, const at::Tensor& mask,
              const at::Tensor& pos, int64_t R, const ImageInputs& images) {
            ForwardExtras extras;
            extras.sum_pi_squared = with_sum_pi_squared;
            extras.images = images;
            return ForwardResponses(model, ids, mask, pos, R, temperature,
                                    with_entropy, sp, extras);
          }));
  // FSDP per-layer: free the root unit (embeddings, heads) it kept.
  if (models::LayerHooks* hooks = model.layer_hooks()) hooks->ReleaseRoot();
  return out;
}

namespace {

namespace mg = parallel::megatron;

// The packed micro-batches' stage forward for the pipeline schedules.
mg::PipelineStageFns StageFns(models::MegatronGPTModel& model,
                              const std::vector<PackedResponses>& packed) {
  return models::StageFns(model, [&packed](int64_t m) {
    const PackedResponses& p = packed[m];
    return models::StageMicroBatch{p.ids, p.pos, &p.info.cu_seqlens};
  });
}

// The interleaved schedule's micro-batch count requirement, naming the
// batch keys that set it.
absl::Status CheckMicroBatchCount(const models::MegatronGPTModel& model,
                                  size_t count) {
  absl::Status s = mg::CheckPipelineMicrobatches(
      static_cast<int64_t>(count), model.mpu()->pp_size(), model.num_chunks());
  if (s.ok()) return s;
  return absl::InvalidArgumentError(absl::StrCat(
      s.message(),
      " (micro-batches come from ppo_mini_batch_size / "
      "ppo_micro_batch_size_per_gpu, log_prob_micro_batch_size_per_gpu, or "
      "use_dynamic_bsz's token budget)"));
}

parallel::Communicator& PipelineGroup(const models::MegatronGPTModel& model) {
  return *model.mpu()->group(mg::MpuGroup::kPp);
}

// Forward-only schedule over the micro-batches; the last stage's results
// broadcast over pp.
absl::StatusOr<ResponseForward> PipelineForwardBatch(
    models::MegatronGPTModel& model, const core::Batch& batch,
    const MicroBatchOptions& micro, double temperature, bool with_entropy) {
  const bool value_model = model.config().is_value_model;
  VERL_ASSIGN_OR_RETURN(at::Tensor responses, batch.GetTensor("responses"));
  const int64_t R = responses.size(1);
  VERL_ASSIGN_OR_RETURN(auto micro_rows, MicroBatchIndices(batch, micro));
  at::NoGradGuard no_grad;
  std::vector<PackedResponses> packed;
  std::vector<at::Tensor> index;
  for (const auto& rows : micro_rows) {
    index.push_back(torch::tensor(rows, torch::kLong));
    auto take = [&](const char* key) {
      return batch.tensor(key).index_select(0, index.back());
    };
    packed.push_back(PackResponses(take("input_ids"), take("attention_mask"),
                                   take("position_ids"), R));
  }
  VERL_RETURN_IF_ERROR(CheckMicroBatchCount(model, packed.size()));
  parallel::Communicator& pp = PipelineGroup(model);
  const int64_t n = static_cast<int64_t>(packed.size());
  std::vector<at::Tensor> outs =
      mg::PipelineForwardOnly(StageFns(model, packed), n, pp);
  // [log_probs; entropy] or [values], [k, B, R], filled on the last stage.
  const int64_t k = value_model ? 1 : (with_entropy ? 2 : 1);
  at::Tensor all = torch::zeros({k, batch.size(), R}, torch::kFloat);
  for (int64_t m = 0; m < n && model.is_last_stage(); ++m) {
    const at::Tensor& ids = batch.tensor("input_ids");
    ResponseForward f = ForwardResponses(
        model, ids.index_select(0, index[m]),
        batch.tensor("attention_mask").index_select(0, index[m]),
        batch.tensor("position_ids").index_select(0, index[m]), R, temperature,
        with_entropy, {}, outs[m]);
    if (value_model) {
      all[0].index_copy_(0, index[m], f.values);
      continue;
    }
    all[0].index_copy_(0, index[m], f.log_probs);
    if (with_entropy) all[1].index_copy_(0, index[m], f.entropy);
  }
  mg::BroadcastFromLastStage(all, pp);
  ResponseForward out;
  if (value_model) {
    out.values = all[0];
  } else {
    out.log_probs = all[0];
    if (with_entropy) out.entropy = all[1];
  }
  return out;
}

}  // namespace

void UseMegatronModel(models::MegatronGPTModel& model, at::Tensor* stage_output,
                      PpoUpdateOptions* update) {
  update->runner = MegatronPipelineRunner(model, stage_output);
  update->before_mini_batch = [&model](int64_t num_micro_batches) {
    model.SetMoeAuxLossScale(1.0 / static_cast<double>(num_micro_batches));
  };
}

MicroBatchRunner MegatronPipelineRunner(models::MegatronGPTModel& model,
                                        at::Tensor* stage_output) {
  if (model.mpu()->pp_size() == 1) return nullptr;
  return [&model, stage_output](const std::vector<core::Batch>& micro,
                                const MicroBatchLossFn& loss) -> absl::Status {
    std::vector<PackedResponses> packed;
    for (const core::Batch& mb : micro) {
      VERL_ASSIGN_OR_RETURN(at::Tensor responses, mb.GetTensor("responses"));
      packed.push_back(
          PackResponses(mb.tensor("input_ids"), mb.tensor("attention_mask"),
                        mb.tensor("position_ids"), responses.size(1)));
    }
    VERL_RETURN_IF_ERROR(CheckMicroBatchCount(model, packed.size()));
    mg::PipelineStageFns fns = StageFns(model, packed);
    fns.loss = [&](int64_t m, const at::Tensor& out) {
      *stage_output = out;
      absl::StatusOr<at::Tensor> l = loss(m);
      *stage_output = at::Tensor();
      VERL_CHECK_OK(l.status());
      return *l;
    };
    mg::PipelineForwardBackward(fns, static_cast<int64_t>(micro.size()),
                                PipelineGroup(model));
    return absl::OkStatus();
  };
}

absl::StatusOr<ResponseForward> ForwardBatchNoGrad(
    models::MegatronGPTModel& model, const core::Batch& batch,
    const MicroBatchOptions& micro, double temperature, bool with_entropy) {
  model.eval();
  if (model.mpu()->pp_size() > 1) {
    return PipelineForwardBatch(model, batch, micro, temperature, with_entropy);
  }
  return ForwardMicroBatches(
      batch, micro, model.config().is_value_model, with_entropy,
      /*with_sum_pi_squared=*/false,
      [&](const at::Tensor& ids, const at::Tensor& mask, const at::Tensor& pos,
          int64_t R, const ImageInputs& images) {
        CHECK(!images.defined())
            << "image inputs are not available with strategy=megatron";
        return ForwardResponses(model, ids, mask, pos, R, temperature,
                                with_entropy);
      });
}

}  // namespace verl::rl
