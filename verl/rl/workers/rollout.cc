#include "verl/rl/workers/rollout.h"

#include <ATen/core/grad_mode.h>
#include <torch/types.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/models/vlm/vlm_processor.h"

namespace verl::rl {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

std::map<std::string, at::Tensor> TrajectoryTensors(
    const at::Tensor& prompt_ids, const at::Tensor& prompt_mask,
    const at::Tensor& responses, const at::Tensor& response_attention,
    const at::Tensor& response_mask, const at::Tensor& rollout_log_probs) {
  const int64_t P = prompt_ids.size(1);
  const int64_t R = responses.size(1);
  at::Tensor prompt_pos = (prompt_mask.cumsum(1) - 1).clamp_min(0);
  at::Tensor last_pos = prompt_pos.select(1, P - 1).unsqueeze(1);
  at::Tensor response_pos =
      last_pos + torch::arange(1, R + 1, torch::kLong).unsqueeze(0);
  std::map<std::string, at::Tensor> tensors = {
      {"prompts", prompt_ids},
      {"responses", responses},
      {"input_ids", torch::cat({prompt_ids, responses}, 1)},
      {"attention_mask", torch::cat({prompt_mask, response_attention}, 1)},
      {"position_ids", torch::cat({prompt_pos, response_pos}, 1)},
      {"response_mask", response_mask},
  };
  if (rollout_log_probs.defined()) {
    tensors["rollout_log_probs"] = rollout_log_probs;
  }
  return tensors;
}

uint64_t RolloutSeed(uint64_t seed, int64_t step, int64_t index) {
  return Mix(Mix(Mix(seed) ^ static_cast<uint64_t>(step)) ^
             static_cast<uint64_t>(index));
}

absl::StatusOr<std::unique_ptr<Rollout>> Rollout::Create(
    std::shared_ptr<models::CausalLM> engine_model,
    const infer::EngineOptions& engine, RolloutOptions options) {
  VERL_RETURN_IF_ERROR(infer::ValidateSamplingParams(options.train_params));
  VERL_RETURN_IF_ERROR(infer::ValidateSamplingParams(options.val_params));
  VERL_ASSIGN_OR_RETURN(
      auto llm, infer::LLMEngine::Create(std::move(engine_model), engine));
  if (options.free_cache_engine) llm->Sleep();
  return std::unique_ptr<Rollout>(
      new Rollout(std::move(llm), std::move(options)));
}

absl::Status Rollout::SyncWeights(const models::CausalLM& trainer_model) {
  at::NoGradGuard no_grad;
  for (const auto& item : trainer_model.named_parameters()) {
    VERL_RETURN_IF_ERROR(
        engine_->UpdateWeights({{item.key(), item.value().detach()}}));
  }
  return absl::OkStatus();
}

absl::StatusOr<core::Batch> Rollout::Generate(const core::Batch& prompts,
                                              int64_t first_global_index,
                                              int64_t step, bool validate) {
  // verl's multi_modal_inputs (vision-language rows; null for text rows).
  std::vector<nlohmann::json> images;
  if (prompts.HasNonTensor("multi_modal_inputs")) {
    images = prompts.non_tensor("multi_modal_inputs");
  }
  const bool any_images =
      std::any_of(images.begin(), images.end(),
                  [](const nlohmann::json& j) { return !j.is_null(); });
  if (options_.agent_loop) {
    if (any_images) {
      return absl::InvalidArgumentError(
          "rollout: prompts with images are not available with agent-loop "
          "(multi-turn) rollouts");
    }
    return GenerateWithAgentLoop(prompts, first_global_index, step, validate);
  }
  const auto t0 = std::chrono::steady_clock::now();
  VERL_ASSIGN_OR_RETURN(at::Tensor input_ids, prompts.GetTensor("input_ids"));
  VERL_ASSIGN_OR_RETURN(at::Tensor attention_mask,
                        prompts.GetTensor("attention_mask"));
  const int64_t B = input_ids.size(0);
  const int64_t P = input_ids.size(1);
  const int64_t R = options_.response_length;
  infer::SamplingParams params =
      validate ? options_.val_params : options_.train_params;
  params.max_tokens = R;
  const int64_t n = params.n;

  if (engine_->sleeping()) engine_->WakeUp();
  const infer::EngineStats before = engine_->stats();
  std::vector<int64_t> request_ids(B);
  at::Tensor ids_cpu = input_ids.to(torch::kLong).contiguous();
  at::Tensor mask_cpu = attention_mask.to(torch::kBool).contiguous();
  auto ids_acc = ids_cpu.accessor<int64_t, 2>();
  auto mask_acc = mask_cpu.accessor<bool, 2>();
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int64_t> prompt;
    for (int64_t t = 0; t < P; ++t) {
      if (mask_acc[b][t]) prompt.push_back(ids_acc[b][t]);
    }
    params.seed = RolloutSeed(options_.seed, step, first_global_index + b);
    infer::MultiModalInput mm;
    if (any_images && !images[b].is_null()) {
      absl::StatusOr<models::vlm::MultiModalInputs> in =
          models::vlm::MultiModalInputsFromJson(images[b]);
      if (!in.ok()) {
        for (int64_t j = 0; j < b; ++j) engine_->AbortRequest(request_ids[j]);
        return Annotate(in.status(), absl::StrCat("rollout prompt ",
                                                  first_global_index + b));
      }
      mm = {in->pixel_values, in->image_grid_thw};
    }
    auto id = engine_->AddRequest(std::move(prompt), params, mm);
    if (!id.ok()) {
      for (int64_t j = 0; j < b; ++j) engine_->AbortRequest(request_ids[j]);
      return Annotate(id.status(),
                      absl::StrCat("rollout prompt ", first_global_index + b));
    }
    request_ids[b] = *id;
  }
  std::vector<infer::RequestOutput> outputs;
  if (!progress_) {
    outputs = engine_->RunUntilDone();
  } else {
    while (engine_->HasUnfinished()) {
      for (infer::RequestOutput& o : engine_->Step())
        outputs.push_back(std::move(o));
      progress_(outputs.size(), B,
                engine_->stats().decode_tokens - before.decode_tokens);
    }
    std::sort(outputs.begin(), outputs.end(), [](const auto& a, const auto& b) {
      return a.request_id < b.request_id;
    });
  }
  if (static_cast<int64_t>(outputs.size()) != B) {
    return absl::InternalError(absl::StrCat("rollout: ", outputs.size(),
                                            " results for ", B, " prompts"));
  }

  // Assemble B*n rows, sample-major within each prompt (repeat interleave).
  at::Tensor responses =
      torch::full({B * n, R}, options_.pad_token_id, torch::kLong);
  at::Tensor response_mask = torch::zeros({B * n, R}, torch::kLong);
  at::Tensor log_probs = torch::zeros({B * n, R}, torch::kFloat);
  auto resp_acc = responses.accessor<int64_t, 2>();
  auto rmask_acc = response_mask.accessor<int64_t, 2>();
  auto lp_acc = log_probs.accessor<float, 2>();
  int64_t generated = 0;
  for (int64_t b = 0; b < B; ++b) {
    const infer::RequestOutput& out = outputs[b];
    for (int64_t s = 0; s < n; ++s) {
      const infer::CompletionOutput& c = out.outputs[s];
      const int64_t row = b * n + s;
      const int64_t len = std::min<int64_t>(c.token_ids.size(), R);
      for (int64_t k = 0; k < len; ++k) {
        resp_acc[row][k] = c.token_ids[k];
        lp_acc[row][k] = c.logprobs[k];
        rmask_acc[row][k] = 1;
      }
      generated += len;
    }
  }
  at::Tensor prompt_ids = input_ids.repeat_interleave(n, 0);
  at::Tensor prompt_mask =
      attention_mask.to(torch::kLong).repeat_interleave(n, 0);
  std::map<std::string, at::Tensor> tensors = TrajectoryTensors(
      prompt_ids, prompt_mask, responses, response_mask,
      response_mask.to(torch::kFloat),
      options_.calculate_log_probs ? log_probs : at::Tensor());
  VERL_ASSIGN_OR_RETURN(core::Batch result,
                        core::Batch::FromColumns(std::move(tensors)));
  if (options_.free_cache_engine) engine_->Sleep();

  RecordEngineStats(t0, before, generated);
  return result;
}

void Rollout::RecordEngineStats(std::chrono::steady_clock::time_point t0,
                                const infer::EngineStats& before,
                                int64_t generated) {
  const infer::EngineStats after = engine_->stats();
  stats_.generate_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  stats_.generated_tokens = generated;
  stats_.preemptions = after.preemptions - before.preemptions;
  stats_.prefix_cache_hit_rate = after.prefix_cache_hit_rate;
}

}  // namespace verl::rl
