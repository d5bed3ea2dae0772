// Validation (greedy or val_kwargs sampling over data.val_files, verl's
// val-core/val-aux metrics) and the generation records dumped to
// trainer.rollout_data_dir / validation_data_dir.
#include <optional>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/rl/trainer/metrics.h"
#include "verl/rl/trainer/ppo_trainer_internal.h"

namespace verl::rl {

using core::Batch;

absl::StatusOr<MetricMap> PpoTrainer::Validate(int64_t step) {
  if (!val_set_) return MetricMap{};
  const int64_t val_bs =
      config_.data().has_val_batch_size() ? config_.data().val_batch_size() : 0;
  DataLoader loader(val_set_.get(), val_bs, config_.data().validation_shuffle(),
                    seed_, false);
  ValidationSamples samples;
  const std::string& dump_dir = config_.trainer().validation_data_dir();
  const bool dump = !dump_dir.empty() && world_->rank() == 0;
  GenerationRecords dumped;
  int64_t index = 0, tokens = 0;
  std::optional<profiler::ProgressBar> bar;
  if (progress_out_ != nullptr) {
    bar.emplace("validation", val_set_->size(), "prompts", progress_out_);
  }
  while (auto rows = loader.Next()) {
    std::vector<std::string> uids;
    for (size_t i = 0; i < rows->size(); ++i)
      uids.push_back(absl::StrCat("val", index++));
    VERL_ASSIGN_OR_RETURN(Batch prompts, encoder_->Encode(*rows, uids));
    VERL_ASSIGN_OR_RETURN(
        Batch gen, GenerateSequences(prompts, /*step=*/0, /*validate=*/true));
    const int64_t vn = rollout_->options().val_params.n;
    VERL_ASSIGN_OR_RETURN(Batch meta,
                          prompts.Select(std::vector<std::string>{}));
    VERL_ASSIGN_OR_RETURN(Batch repeated, meta.Repeat(vn, true));
    VERL_RETURN_IF_ERROR(gen.Union(repeated));
    VERL_ASSIGN_OR_RETURN(auto requests, RewardRequests(gen));
    VERL_ASSIGN_OR_RETURN(at::Tensor responses, gen.GetTensor("responses"));
    VERL_ASSIGN_OR_RETURN(RewardOutput scores,
                          val_reward_->Score(requests, responses.size(1)));
    at::Tensor totals = scores.reward_tensor.sum(1);
    if (dump) {
      std::vector<std::string> extra_keys;
      for (const auto& [k, v] : scores.extra_numeric) {
        VERL_RETURN_IF_ERROR(gen.SetNonTensor(
            k, std::vector<nlohmann::json>(v.begin(), v.end())));
        extra_keys.push_back(k);
      }
      VERL_ASSIGN_OR_RETURN(GenerationRecords part,
                            Records(gen, totals, extra_keys));
      AppendRecords(part, &dumped);
    }
    VERL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> gen_uids,
                          gen.GetNonTensor("uid"));
    for (int64_t i = 0; i < gen.size(); ++i) {
      samples.data_sources.push_back(requests[i].sample.data_source);
      samples.uids.push_back(gen_uids[i]);
      samples.numeric["reward"].push_back(totals[i].item<double>());
      samples.responses.push_back(requests[i].sample.solution);
    }
    for (const auto& [k, v] : scores.extra_numeric) {
      for (double x : v) samples.numeric[k].push_back(x);
    }
    if (scores.extra_text.count("pred")) {
      for (const auto& p : scores.extra_text.at("pred"))
        samples.preds.push_back(p);
    }
    VERL_ASSIGN_OR_RETURN(at::Tensor response_mask,
                          gen.GetTensor("response_mask"));
    tokens += static_cast<int64_t>(response_mask.sum().item<double>());
    if (bar) bar->Update(index, tokens);
  }
  if (bar) bar->Finish();
  if (dump) VERL_RETURN_IF_ERROR(DumpGenerations(dump_dir, step, dumped));
  VERL_ASSIGN_OR_RETURN(MetricMap metrics, ComputeValidationMetrics(samples));
  MetricMap diversity = ComputeDiversityMetrics(samples);
  metrics.insert(diversity.begin(), diversity.end());
  return metrics;
}

absl::StatusOr<GenerationRecords> PpoTrainer::Records(
    const Batch& gen, const at::Tensor& seq_scores,
    const std::vector<std::string>& extra_keys) const {
  GenerationRecords r;
  VERL_ASSIGN_OR_RETURN(at::Tensor prompts, gen.GetTensor("prompts"));
  VERL_ASSIGN_OR_RETURN(at::Tensor attention_mask,
                        gen.GetTensor("attention_mask"));
  const at::Tensor prompt_mask = attention_mask.narrow(1, 0, prompts.size(1));
  VERL_ASSIGN_OR_RETURN(at::Tensor responses, gen.GetTensor("responses"));
  VERL_ASSIGN_OR_RETURN(at::Tensor response_mask,
                        gen.GetTensor("response_mask"));
  VERL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> reward_models,
                        gen.GetNonTensor("reward_model"));
  const at::Tensor scores = seq_scores.to(at::kDouble).contiguous();
  for (int64_t i = 0; i < gen.size(); ++i) {
    r.inputs.push_back(tokenizer_->Decode(MaskedIds(prompts, prompt_mask, i),
                                          /*skip_special=*/true));
    r.outputs.push_back(tokenizer_->Decode(
        MaskedIds(responses, response_mask, i), /*skip_special=*/true));
    r.gts.push_back(GroundTruth(reward_models[i]));
    r.scores.push_back(scores.data_ptr<double>()[i]);
  }
  for (const std::string& key : extra_keys) {
    if (gen.HasNonTensor(key)) r.extra[key] = gen.non_tensor(key);
  }
  return r;
}

}  // namespace verl::rl
