// File: verl/rl/trainer/sft_trainer.cc
#include "verl/rl/trainer/sft_trainer.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/status.h"
#include "verl/models/attention.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/logprob.h"
#include "verl/models/lora.h"
#include "verl/models/padding.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/parallel/ulysses.h"
#include "verl/rl/trainer/config/sft_config.h"
#include "verl/rl/workers/lora_policy.h"
#include "verl/rl/workers/ppo_update.h"

namespace verl::rl {
namespace {

namespace fs = std::filesystem;

int DpSize(const parallel::Communicator* dp) { return dp ? dp->size() : 1; }
int DpRank(const parallel::Communicator* dp) { return dp ? dp->rank() : 0; }

// Rows [rank·n/size, (rank+1)·n/size) of `rows`.
std::vector<int64_t> RankSlice(const std::vector<int64_t>& rows, int rank,
                               int size) {
  const int64_t n = static_cast<int64_t>(rows.size());
  return {rows.begin() + rank * n / size, rows.begin() + (rank + 1) * n / size};
}

// Calls fn(micro_rows) for consecutive chunks of `micro` rows.
template <typename Fn>
absl::Status ForEachMicroBatch(const std::vector<int64_t>& rows, int64_t micro,
                               Fn fn) {
  for (size_t i = 0; i < rows.size(); i += micro) {
    const size_t end = std::min(rows.size(), i + static_cast<size_t>(micro));
    VERL_RETURN_IF_ERROR(
        fn(std::vector<int64_t>(rows.begin() + i, rows.begin() + end)));
  }
  return absl::OkStatus();
}

// Σ CE (differentiable) and the loss-token count of `rows`.
std::pair<SftLossSum, int64_t> MicroLoss(models::CausalLM& model,
                                         const SftDataset& data,
                                         const std::vector<int64_t>& rows,
                                         const SequenceParallel& sp) {
  const std::vector<at::Tensor> t = CollateSft(data, rows);
  return {SftTokenLossSum(model, t[0], t[1], t[2], t[3], sp),
          t[3].narrow(1, 1, t[3].size(1) - 1).sum().item<int64_t>()};
}

std::vector<at::Tensor> Parameters(models::CausalLM& model) {
  std::vector<at::Tensor> params;
  for (const auto& p : model.parameters()) {
    if (p.requires_grad()) params.push_back(p);
  }
  return params;
}

std::string StepDir(const SftTrainerConfig& config, int64_t step) {
  return absl::StrCat(config.trainer().default_local_dir(), "/global_step_",
                      step);
}

// Ulysses needs the attention heads split evenly over the sp ranks (key/value
// heads: one of them and sp divides the other, as the PPO side's attention).
absl::Status CheckSequenceParallel(const models::ModelConfig& c, int64_t sp) {
  if (sp <= 1) return absl::OkStatus();
  const int64_t kv = c.num_key_value_heads;
  if (c.num_attention_heads % sp != 0 || (kv % sp != 0 && sp % kv != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ulysses_sequence_parallel_size: ", sp,
                     " must divide the model's ", c.num_attention_heads,
                     " attention heads, and divide or be a multiple "
                     "of its ",
                     kv, " key/value heads"));
  }
  return absl::OkStatus();
}

}  // namespace

SftLossSum SftTokenLossSum(models::CausalLM& model, const at::Tensor& input_ids,
                           const at::Tensor& attention_mask,
                           const at::Tensor& position_ids,
                           const at::Tensor& loss_mask,
                           const SequenceParallel& sp) {
  const int64_t batch = input_ids.size(0), length = input_ids.size(1);
  const models::UnpadInfo info = models::Unpad(attention_mask.to(at::kBool));
  const at::Tensor ids = models::UnpadTensor(input_ids, info);
  const at::Tensor pos = models::UnpadTensor(position_ids, info);
  SftLossSum out;
  at::Tensor hidden;
  int64_t lo = 0, size = ids.size(0);  // this rank's packed tokens
  if (sp.enabled()) {
    UlyssesSlice s =
        SliceForSequenceParallel(model, ids, pos, info.cu_seqlens, sp);
    out.attention = s.attention;
    lo = s.lo;
    size = s.size;
    hidden = model.Forward(s.ids, s.pos, *out.attention);
  } else {
    out.attention = std::make_shared<models::VarlenCausalAttention>(
        info.cu_seqlens, model.LayerWindows());
    hidden = model.Forward(ids, pos, *out.attention);
  }

  // Position t predicts token t+1: predictors are where loss_mask[:, t+1].
  at::Tensor predicts = at::zeros({batch, length}, at::kBool);
  predicts.narrow(1, 0, length - 1)
      .copy_(loss_mask.narrow(1, 1, length - 1).to(at::kBool) &
             attention_mask.narrow(1, 0, length - 1).to(at::kBool));
  const at::Tensor flat_src = predicts.reshape(-1).nonzero().reshape(-1);
  if (flat_src.numel() == 0) {
    out.loss_sum = hidden.sum().mul(0).to(at::kFloat);
    return out;
  }
  at::Tensor packed_row = at::full({batch * length}, -1, at::kLong);
  packed_row.index_copy_(0, info.indices,
                         at::arange(info.indices.size(0), at::kLong));
  const at::Tensor rows = packed_row.index_select(0, flat_src);
  const at::Tensor targets =
      input_ids.reshape(-1).index_select(0, flat_src + 1);
  // This rank's predicting positions (all of them without sp).
  const at::Tensor mine = (rows >= lo) & (rows < lo + size);
  at::Tensor log_probs =
      model
          .LabelLogProbs(hidden.index_select(0, rows.masked_select(mine) - lo),
                         targets.masked_select(mine), 1.0, false)
          .log_probs;
  if (sp.enabled()) {
    // Every sp rank sums the whole gathered set: one loss per group; the
    // backward scale sp undoes the state's average over the sp ranks.
    log_probs = parallel::GatherSeq(log_probs.to(at::kFloat), sp.group,
                                    sp.group->size());
  }
  out.loss_sum = log_probs.sum().neg();
  return out;
}

std::vector<at::Tensor> CollateSft(const SftDataset& data,
                                   const std::vector<int64_t>& rows) {
  const int64_t b = static_cast<int64_t>(rows.size()), l = data.max_length();
  std::vector<at::Tensor> out;
  for (int field = 0; field < 4; ++field) {
    at::Tensor t = at::empty({b, l}, at::kLong);
    int64_t* dst = t.data_ptr<int64_t>();
    for (int64_t i = 0; i < b; ++i) {
      const SftSample& s = data.sample(rows[i]);
      const std::vector<int64_t>& src = field == 0   ? s.input_ids
                                        : field == 1 ? s.attention_mask
                                        : field == 2 ? s.position_ids
                                                     : s.loss_mask;
      std::copy(src.begin(), src.end(), dst + i * l);
    }
    out.push_back(t);
  }
  return out;
}

absl::StatusOr<SftStepMetrics> SftTrainStep(
    models::CausalLM& model, TrainState& state, const SftDataset& data,
    const std::vector<int64_t>& rows, int64_t micro_batch_size,
    parallel::Communicator* dp, const SequenceParallel& sp) {
  CHECK_GT(micro_batch_size, 0);
  int64_t local_tokens = 0;
  for (int64_t r : rows) {
    const std::vector<int64_t>& m = data.sample(r).loss_mask;
    local_tokens += std::accumulate(m.begin(), m.end(), int64_t{0});
  }
  std::vector<double> counts = {static_cast<double>(local_tokens)};
  VERL_RETURN_IF_ERROR(AllReduceSum(dp, counts));
  const double global_tokens = std::max(counts[0], 1.0);
  const double scale = DpSize(dp) / global_tokens;

  state.ZeroGrad();
  double loss_sum = 0;
  VERL_RETURN_IF_ERROR(ForEachMicroBatch(
      rows, micro_batch_size,
      [&](const std::vector<int64_t>& micro) -> absl::Status {
        auto [sum, tokens] = MicroLoss(model, data, micro, sp);
        (sum.loss_sum * scale).backward();
        loss_sum += sum.loss_sum.item<double>();
        return absl::OkStatus();
      }));
  std::vector<double> summed = {loss_sum};
  VERL_RETURN_IF_ERROR(AllReduceSum(dp, summed));
  SftStepMetrics out;
  out.loss = summed[0] / global_tokens;
  out.tokens = static_cast<int64_t>(counts[0]);
  VERL_ASSIGN_OR_RETURN(out.grad_norm, state.Step());
  return out;
}

absl::StatusOr<double> SftEvalLoss(models::CausalLM& model,
                                   const SftDataset& data,
                                   int64_t micro_batch_size,
                                   parallel::Communicator* dp,
                                   const SequenceParallel& sp) {
  CHECK_GT(micro_batch_size, 0);
  at::NoGradGuard no_grad;
  std::vector<int64_t> all(data.size());
  std::iota(all.begin(), all.end(), 0);
  std::vector<double> sums = {0.0, 0.0};  // CE, tokens
  VERL_RETURN_IF_ERROR(ForEachMicroBatch(
      RankSlice(all, DpRank(dp), DpSize(dp)), micro_batch_size,
      [&](const std::vector<int64_t>& micro) -> absl::Status {
        auto [sum, tokens] = MicroLoss(model, data, micro, sp);
        sums[0] += sum.loss_sum.item<double>();
        sums[1] += static_cast<double>(tokens);
        return absl::OkStatus();
      }));
  VERL_RETURN_IF_ERROR(AllReduceSum(dp, sums));
  return sums[0] / std::max(sums[1], 1.0);
}

absl::StatusOr<OptimizerOptions> SftOptimizerOptions(
    const SftOptimConfig& optim, int64_t total_steps) {
  OptimizerOptions o;
  o.lr = optim.lr();
  if (optim.betas_size() != 0 && optim.betas_size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optim.betas: expected 2 values, got ", optim.betas_size()));
  }
  o.beta1 = optim.betas_size() == 2 ? optim.betas(0) : 0.9;
  o.beta2 = optim.betas_size() == 2 ? optim.betas(1) : 0.95;
  o.weight_decay = optim.weight_decay();
  o.grad_clip = optim.clip_grad();
  if (optim.lr_scheduler() != "cosine" && optim.lr_scheduler() != "wsd") {
    return absl::InvalidArgumentError(
        absl::StrCat("optim.lr_scheduler: \"", optim.lr_scheduler(),
                     "\" (expected cosine or wsd)"));
  }
  o.lr_scheduler_type = optim.lr_scheduler();
  o.total_steps = total_steps;
  o.warmup_steps = static_cast<int64_t>(optim.lr_warmup_steps_ratio() *
                                        static_cast<double>(total_steps));
  return o;
}

absl::Status SaveSftModel(const std::string& dir, models::CausalLM& model,
                          const models::Tokenizer& tokenizer) {
  models::HfCheckpoint ckpt;
  ckpt.config = model.config();
  if (!models::LoraModulePaths(model).empty()) {
    for (auto& [name, t] : MergedLoraWeights(model)) {
      ckpt.tensors[name] = t.contiguous();
    }
  } else {
    for (const auto& item : model.named_parameters()) {
      ckpt.tensors[item.key()] = item.value().detach().contiguous();
    }
  }
  const std::string tok_dir = dir + ".tokenizer.tmp";
  VERL_RETURN_IF_ERROR(tokenizer.SaveToDirectory(tok_dir));
  models::HfSaveOptions options;
  options.tokenizer_source_dir = tok_dir;
  absl::Status saved = models::SaveHfCheckpoint(dir, ckpt, options);
  std::error_code ec;
  fs::remove_all(tok_dir, ec);
  return saved;
}

absl::StatusOr<SftResult> RunSft(const SftTrainerConfig& raw_config,
                                 models::CausalLM& model,
                                 const models::Tokenizer& tokenizer,
                                 const SftRunOptions& options) {
  SftTrainerConfig config = raw_config;
  ResolveSftTrainerConfig(&config);
  VERL_RETURN_IF_ERROR(ValidateSftTrainerConfig(config));
  const SftDataConfig& dc = config.data();
  // Ulysses: rows over the dp ranks, each micro-batch's tokens over sp.
  const int64_t sp_size = config.ulysses_sequence_parallel_size();
  std::shared_ptr<parallel::Communicator> dp_group = options.dp_group;
  SequenceParallel sp;
  if (sp_size > 1) {
    VERL_RETURN_IF_ERROR(CheckSequenceParallel(model.config(), sp_size));
    const int64_t ranks = DpSize(options.dp_group.get());
    if (ranks % sp_size != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ulysses_sequence_parallel_size: ", sp_size,
                       " must divide the number of ranks (", ranks, ")"));
    }
    VERL_ASSIGN_OR_RETURN(
        parallel::UlyssesGroups groups,
        parallel::MakeUlyssesGroups(options.dp_group, sp_size));
    dp_group = groups.dp;
    sp.group = groups.sp;
  }
  parallel::Communicator* dp = dp_group.get();
  const int world = DpSize(dp), rank = DpRank(dp);
  const bool is_rank0 = DpRank(options.dp_group.get()) == 0;
  if (dc.train_batch_size() <= 0 || dc.train_batch_size() % world != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.train_batch_size: ", dc.train_batch_size(),
                     " must be positive and divisible by the number of ranks (",
                     world, ")"));
  }
  if (dc.micro_batch_size_per_gpu() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.micro_batch_size_per_gpu: ", dc.micro_batch_size_per_gpu(),
        " (must be positive)"));
  }

  // Datasets.
  VERL_ASSIGN_OR_RETURN(
      SftTruncation truncation,
      ParseSftTruncation(TruncationMode::Value_Name(dc.truncation())));
  SftDatasetOptions ds_opt;
  ds_opt.prompt_key = dc.prompt_key();
  ds_opt.response_key = dc.response_key();
  ds_opt.prompt_dict_keys.assign(dc.prompt_dict_keys().begin(),
                                 dc.prompt_dict_keys().end());
  ds_opt.response_dict_keys.assign(dc.response_dict_keys().begin(),
                                   dc.response_dict_keys().end());
  ds_opt.max_length = dc.max_length();
  ds_opt.truncation = truncation;
  ds_opt.multiturn = dc.multiturn().enable();
  ds_opt.messages_key = dc.multiturn().messages_key();
  std::optional<SftDataset> own_train, own_val;
  const SftDataset* train = options.train_data;
  const SftDataset* val = options.val_data;
  if (train == nullptr) {
    ds_opt.max_samples = dc.train_max_samples();
    absl::StatusOr<SftDataset> ds = SftDataset::Load(
        {dc.train_files().begin(), dc.train_files().end()}, tokenizer, ds_opt);
    if (!ds.ok()) return Annotate(ds.status(), "data.train_files");
    own_train = *std::move(ds);
    train = &*own_train;
  }
  if (val == nullptr && dc.val_files_size() > 0) {
    ds_opt.max_samples = dc.val_max_samples();
    absl::StatusOr<SftDataset> ds = SftDataset::Load(
        {dc.val_files().begin(), dc.val_files().end()}, tokenizer, ds_opt);
    if (!ds.ok()) return Annotate(ds.status(), "data.val_files");
    own_val = *std::move(ds);
    val = &*own_val;
  }
  const int64_t steps_per_epoch = train->size() / dc.train_batch_size();
  if (steps_per_epoch == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.train_batch_size: ", dc.train_batch_size(),
                     " exceeds the ", train->size(), " training samples"));
  }
  const SftTrainerSection& tc = config.trainer();
  const int64_t total_steps = tc.has_total_training_steps()
                                  ? tc.total_training_steps()
                                  : steps_per_epoch * tc.total_epochs();
  if (total_steps <= 0) {
    return absl::InvalidArgumentError(
        "trainer.total_epochs / total_training_steps give no training steps");
  }

  // LoRA (verl's PEFT path): adapters on the loaded weights, only they train.
  const SftModelConfig& mc = config.model();
  models::LoraConfig lora;
  if (mc.lora_rank() > 0) {
    lora.rank = mc.lora_rank();
    lora.alpha = mc.lora_alpha();
    if (mc.target_modules_size() > 0) {
      lora.target_modules.assign(mc.target_modules().begin(),
                                 mc.target_modules().end());
    }
    if (models::LoraModulePaths(model).empty()) {
      VERL_RETURN_IF_ERROR(models::ApplyLora(
          model, lora, static_cast<uint64_t>(config.trainer().seed())));
    }
  }
  model.enable_gradient_checkpointing(
      config.model().enable_gradient_checkpointing());
  model.train();
  VERL_ASSIGN_OR_RETURN(OptimizerOptions opt,
                        SftOptimizerOptions(config.optim(), total_steps));
  ReplicatedTrainState state(Parameters(model), opt, options.dp_group);

  std::unique_ptr<profiler::Tracker> tracker;
  if (options.log_metrics && is_rank0) {
    profiler::TrackingOptions topt;
    topt.project_name = tc.project_name();
    topt.experiment_name = tc.experiment_name();
    topt.backends.assign(tc.logger().begin(), tc.logger().end());
    if (topt.backends.empty()) topt.backends = {"console"};
    topt.total_steps = total_steps;
    VERL_ASSIGN_OR_RETURN(tracker, profiler::Tracker::Create(topt));
  }
  const bool saving = options.save_model && is_rank0;

  SftResult result;
  const int64_t batch = dc.train_batch_size();
  std::vector<int64_t> order(train->size());
  for (int64_t step = 1; step <= total_steps; ++step) {
    const int64_t epoch = (step - 1) / steps_per_epoch;
    const int64_t in_epoch = (step - 1) % steps_per_epoch;
    if (in_epoch == 0) {  // seeded per-epoch shuffle, the same on every rank
      std::iota(order.begin(), order.end(), 0);
      std::mt19937_64 rng(static_cast<uint64_t>(tc.seed() + epoch));
      std::shuffle(order.begin(), order.end(), rng);
    }
    const std::vector<int64_t> global(order.begin() + in_epoch * batch,
                                      order.begin() + (in_epoch + 1) * batch);
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<SftStepMetrics> m =
        SftTrainStep(model, state, *train, RankSlice(global, rank, world),
                     dc.micro_batch_size_per_gpu(), dp, sp);
    if (!m.ok()) return Annotate(m.status(), absl::StrCat("step ", step));
    state.StepSchedule();
    profiler::Metrics metrics = {
        {"train/loss", m->loss},
        {"train/lr(1e-3)", state.lr() * 1e3},
        {"train/grad_norm", m->grad_norm},
        {"train/time(s)",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
             .count()}};
    result.train_losses.push_back(m->loss);
    const bool last = step == total_steps;
    if (val != nullptr &&
        (last || (tc.test_freq() > 0 && step % tc.test_freq() == 0))) {
      VERL_ASSIGN_OR_RETURN(
          double vloss,
          SftEvalLoss(model, *val, dc.micro_batch_size_per_gpu(), dp, sp));
      metrics["val/loss"] = vloss;
      result.val_losses.emplace_back(step, vloss);
    }
    if (tracker) VERL_RETURN_IF_ERROR(tracker->Log(metrics, step));
    if (saving &&
        (last || (tc.save_freq() > 0 && step % tc.save_freq() == 0))) {
      const std::string dir =
          absl::StrCat(StepDir(config, step), "/huggingface");
      VERL_RETURN_IF_ERROR(SaveSftModel(dir, model, tokenizer));
      if (mc.lora_rank() > 0) {
        VERL_RETURN_IF_ERROR(models::SaveLoraAdapter(
            model, lora, absl::StrCat(StepDir(config, step), "/lora_adapter")));
      }
      if (last) result.final_model_dir = dir;
    }
  }
  result.global_steps = total_steps;
  return result;
}

absl::StatusOr<SftModel> LoadSftModel(const SftTrainerConfig& config) {
  SftModel out;
  const std::string& dir = config.model().partial_pretrain();
  if (dir.empty()) {
    out.tokenizer =
        std::make_unique<models::Tokenizer>(models::MakeBuiltinTokenizer());
    VERL_ASSIGN_OR_RETURN(models::ModelConfig cfg,
                          models::MakePreset(config.model().preset(),
                                             out.tokenizer->vocab_size()));
    cfg.eos_token_ids = {out.tokenizer->eos_token_id()};
    out.model = models::CreateModel(
        cfg, static_cast<uint64_t>(config.trainer().seed()));
    return out;
  }
  absl::StatusOr<models::Tokenizer> tok = models::Tokenizer::FromDirectory(dir);
  if (!tok.ok()) return Annotate(tok.status(), "model.partial_pretrain");
  out.tokenizer = std::make_unique<models::Tokenizer>(*std::move(tok));
  absl::StatusOr<models::HfCheckpoint> ckpt = models::LoadHfConfigs(dir);
  if (!ckpt.ok()) return Annotate(ckpt.status(), "model.partial_pretrain");
  out.model = models::CreateModel(ckpt->config, 0);
  std::map<std::string, at::Tensor> params;
  for (const auto& item : out.model->named_parameters()) {
    params[item.key()] = item.value();
  }
  absl::Status loaded = models::LoadHfWeightsInto(dir, &params);
  if (!loaded.ok()) return Annotate(loaded, "model.partial_pretrain");
  return out;
}

absl::StatusOr<SftResult> RunSftFromConfig(
    const SftTrainerConfig& config,
    std::shared_ptr<parallel::Communicator> world) {
  VERL_ASSIGN_OR_RETURN(SftModel loaded, LoadSftModel(config));
  SftRunOptions options;
  options.dp_group = std::move(world);
  return RunSft(config, *loaded.model, *loaded.tokenizer, options);
}

}  // namespace verl::rl
