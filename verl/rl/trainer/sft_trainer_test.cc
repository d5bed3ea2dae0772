// File: verl/rl/trainer/sft_trainer_test.cc
#include "verl/rl/trainer/sft_trainer.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/log_softmax.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/config_loader.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/lora.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/rl/data/synthetic_tasks.h"
#include "verl/rl/trainer/config/sft_config.h"

namespace verl::rl {
namespace {

using ::testing::HasSubstr;

class SftTrainerTest : public ::testing::Test {
 protected:
  SftTrainerTest() : tok_(models::MakeBuiltinTokenizer()) {}

  std::shared_ptr<models::CausalLM> Model(uint64_t seed = 3) {
    absl::StatusOr<models::ModelConfig> cfg =
        models::MakePreset("tiny-qwen2", tok_.vocab_size());
    CHECK(cfg.ok());
    return models::CreateModel(*cfg, seed);
  }

  SftDataset Arithmetic(int64_t rows, const std::string& split, uint64_t seed) {
    ArithmeticTaskOptions opt;
    opt.num_rows = rows;
    opt.split = split;
    opt.seed = seed;
    SftDatasetOptions ds;
    ds.prompt_key = "extra_info.question";
    ds.response_key = "extra_info.answer";
    ds.max_length = 96;
    ds.truncation = SftTruncation::kRight;
    absl::StatusOr<SftDataset> out =
        SftDataset::FromRows(MakeArithmeticRows(opt), tok_, ds);
    CHECK(out.ok()) << out.status();
    return *std::move(out);
  }

  models::Tokenizer tok_;
};

TEST_F(SftTrainerTest, LossEqualsNaivePerTokenCrossEntropy) {
  auto model = Model();
  const SftDataset data = Arithmetic(5, "train", 1);
  const std::vector<int64_t> rows = {0, 1, 2, 3, 4};
  const std::vector<at::Tensor> t = CollateSft(data, rows);
  const double got =
      SftTokenLossSum(*model, t[0], t[1], t[2], t[3]).loss_sum.item<double>();

  // Reference: the padded forward (a different code path) and a plain loop.
  at::NoGradGuard no_grad;
  const at::Tensor logits =
      model->ForwardPadded(t[0], t[1], t[2]).logits.to(at::kDouble);
  const at::Tensor logp = at::log_softmax(logits, -1);
  double want = 0;
  int64_t tokens = 0;
  for (int64_t b = 0; b < t[0].size(0); ++b) {
    for (int64_t i = 1; i < t[0].size(1); ++i) {
      if (t[3][b][i].item<int64_t>() == 0) continue;
      want -= logp[b][i - 1][t[0][b][i].item<int64_t>()].item<double>();
      ++tokens;
    }
  }
  EXPECT_GT(tokens, 10);
  EXPECT_NEAR(got, want, 1e-4 * std::abs(want));
}

TEST_F(SftTrainerTest, StepIsMicroBatchInvariant) {
  const SftDataset data = Arithmetic(6, "train", 2);
  const std::vector<int64_t> rows = {5, 0, 3, 1, 4, 2};
  absl::StatusOr<OptimizerOptions> opt =
      SftOptimizerOptions(SftOptimConfig(), 10);
  ASSERT_TRUE(opt.ok());
  opt->lr = 1e-3;
  std::vector<std::vector<at::Tensor>> params;
  std::vector<SftStepMetrics> metrics;
  for (int64_t micro : {1, 4, 6}) {
    auto model = Model();
    std::vector<at::Tensor> p;
    for (const auto& t : model->parameters()) p.push_back(t);
    ReplicatedTrainState state(p, *opt, nullptr);
    absl::StatusOr<SftStepMetrics> m =
        SftTrainStep(*model, state, data, rows, micro, nullptr);
    ASSERT_TRUE(m.ok()) << m.status();
    metrics.push_back(*m);
    params.push_back(p);
  }
  for (size_t k = 1; k < metrics.size(); ++k) {
    EXPECT_NEAR(metrics[k].loss, metrics[0].loss, 1e-5);
    EXPECT_NEAR(metrics[k].grad_norm, metrics[0].grad_norm,
                1e-5 * metrics[0].grad_norm);
    EXPECT_EQ(metrics[k].tokens, metrics[0].tokens);
    for (size_t i = 0; i < params[0].size(); ++i) {
      EXPECT_TRUE(at::allclose(params[k][i], params[0][i], 1e-5, 1e-6)) << i;
    }
  }
  // The loss is the token mean: equal to the summed CE / tokens before the
  // step (checked on a fresh model).
  auto fresh = Model();
  const std::vector<at::Tensor> t = CollateSft(data, rows);
  const double sum =
      SftTokenLossSum(*fresh, t[0], t[1], t[2], t[3]).loss_sum.item<double>();
  EXPECT_NEAR(metrics[0].loss, sum / metrics[0].tokens, 1e-5);
}

TEST_F(SftTrainerTest, OptimizerOptionsFollowConfig) {
  SftOptimConfig optim;
  absl::StatusOr<OptimizerOptions> o = SftOptimizerOptions(optim, 25);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->beta2, 0.95);
  EXPECT_EQ(o->warmup_steps, 2);
  EXPECT_EQ(o->lr_scheduler_type, "cosine");
  optim.set_lr_scheduler("linear");
  EXPECT_THAT(std::string(SftOptimizerOptions(optim, 25).status().message()),
              HasSubstr("optim.lr_scheduler: \"linear\""));
}

TEST_F(SftTrainerTest, ShortRunLowersValLossAndSavesLoadableModel) {
  const SftDataset train = Arithmetic(96, "train", 11);
  const SftDataset val = Arithmetic(16, "test", 12);
  auto model = Model();
  const double before = *SftEvalLoss(*model, val, 8, nullptr);

  SftTrainerConfig config;
  config.mutable_data()->set_train_batch_size(16);
  config.mutable_data()->set_micro_batch_size_per_gpu(8);
  config.mutable_optim()->set_lr(3e-3);
  config.mutable_optim()->set_lr_scheduler("wsd");
  config.mutable_model()->set_enable_gradient_checkpointing(true);
  config.mutable_trainer()->set_total_epochs(1);
  config.mutable_trainer()->set_test_freq(3);
  const std::string dir = ::testing::TempDir() + "/sft_run";
  config.mutable_trainer()->set_default_local_dir(dir);
  SftRunOptions options;
  options.train_data = &train;
  options.val_data = &val;
  options.log_metrics = false;
  absl::StatusOr<SftResult> result = RunSft(config, *model, tok_, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->global_steps, 6);
  ASSERT_EQ(result->val_losses.size(), 2u);  // step 3 and the last step
  EXPECT_EQ(result->val_losses[0].first, 3);
  const double after = result->val_losses.back().second;
  EXPECT_LT(after, 0.6 * before) << "before " << before;

  // The saved HF folder reloads to the same model and val loss.
  EXPECT_EQ(result->final_model_dir, dir + "/global_step_6/huggingface");
  SftTrainerConfig load;
  load.mutable_model()->set_partial_pretrain(result->final_model_dir);
  absl::StatusOr<SftModel> loaded = LoadSftModel(load);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->tokenizer->vocab_size(), tok_.vocab_size());
  EXPECT_NEAR(*SftEvalLoss(*loaded->model, val, 8, nullptr), after, 1e-5);
}

TEST_F(SftTrainerTest, BadConfigErrors) {
  const SftDataset train = Arithmetic(8, "train", 1);
  auto model = Model();
  SftRunOptions options;
  options.train_data = &train;
  options.log_metrics = false;
  options.save_model = false;
  SftTrainerConfig config;
  config.mutable_data()->set_train_batch_size(16);
  EXPECT_THAT(
      std::string(RunSft(config, *model, tok_, options).status().message()),
      HasSubstr("data.train_batch_size: 16 exceeds the 8 training samples"));
  config.mutable_data()->set_train_batch_size(4);
  // Keys the SFT trainer does not serve are refused with the reason.
  config.mutable_data()->set_chat_template("{{ x }}");
  config.mutable_trainer()->set_resume_mode("resume_path");
  const std::string m(RunSft(config, *model, tok_, options).status().message());
  EXPECT_THAT(m, HasSubstr("'data.chat_template={{ x }}' is not available "
                           "here: the tokenizer's own chat template"));
  EXPECT_THAT(m, HasSubstr("'trainer.resume_mode=resume_path' is not "
                           "available here: SFT saves HF folders only"));
  config.mutable_data()->clear_chat_template();
  config.mutable_trainer()->clear_resume_mode();
  // Ulysses needs sp ranks and heads that split over them.
  config.set_ulysses_sequence_parallel_size(2);
  EXPECT_THAT(
      std::string(RunSft(config, *model, tok_, options).status().message()),
      HasSubstr("ulysses_sequence_parallel_size: 2 must divide the number of "
                "ranks (1)"));
  config.set_ulysses_sequence_parallel_size(3);
  EXPECT_THAT(
      std::string(RunSft(config, *model, tok_, options).status().message()),
      HasSubstr("ulysses_sequence_parallel_size: 3 must divide the model's 4 "
                "attention heads"));
}

// Every key of verl's sft_trainer.yaml (testdata) is a key here with a rule;
// every key of the schema has one, and every rule matches a key.
TEST(SftKeysTest, EveryKeyIsKnownAndClassified) {
  std::set<std::string> leaves;
  std::set<const KeyRule*> used;
  std::vector<std::string> unclassified;
  for (const auto& [key, value] :
       core::FlattenConfig(*LoadSftTrainerConfig("", {}))) {
    leaves.insert(key);
    const KeyRule* rule = FindKeyRuleIn(SftKeyRules(), key);
    if (rule == nullptr) unclassified.push_back(key);
    used.insert(rule);
  }
  EXPECT_TRUE(unclassified.empty()) << ::testing::PrintToString(unclassified);
  for (const KeyRule& rule : SftKeyRules()) {
    EXPECT_TRUE(used.count(&rule) > 0) << "stale rule " << rule.pattern;
    if (rule.use != KeyUse::kServed) {
      EXPECT_STRNE(rule.reason, "");
    }
  }
  std::ifstream in("verl/rl/trainer/config/testdata/verl_sft_trainer_keys.txt");
  ASSERT_TRUE(in.good());
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    ++count;
    const bool known = leaves.count(line) > 0 ||
                       absl::c_any_of(leaves, [&](const std::string& k) {
                         return absl::StartsWith(k, line + ".");
                       });
    EXPECT_TRUE(known) << "verl SFT key unknown here: " << line;
  }
  EXPECT_GT(count, 60);
}

// model.lora_rank > 0: only the adapters train (the base weights stay), the
// loss falls, the HF folder holds the merged weights (it reloads as a plain
// model with the adapted model's loss) and lora_adapter/ the PEFT adapter.
TEST_F(SftTrainerTest, LoraTrainsAdaptersAndSavesMergedModel) {
  const SftDataset train = Arithmetic(32, "train", 21);
  const SftDataset val = Arithmetic(8, "test", 22);
  auto model = Model();
  std::map<std::string, at::Tensor> base;
  for (const auto& item : model->named_parameters()) {
    base[item.key()] = item.value().detach().clone();
  }
  const double before = *SftEvalLoss(*model, val, 8, nullptr);
  SftTrainerConfig config;
  config.mutable_data()->set_train_batch_size(8);
  config.mutable_data()->set_micro_batch_size_per_gpu(8);
  config.mutable_optim()->set_lr(1e-2);
  config.mutable_model()->set_lora_rank(4);
  config.mutable_model()->set_lora_alpha(8);
  config.mutable_trainer()->set_total_epochs(1);
  const std::string dir = ::testing::TempDir() + "/sft_lora";
  config.mutable_trainer()->set_default_local_dir(dir);
  SftRunOptions options;
  options.train_data = &train;
  options.val_data = &val;
  options.log_metrics = false;
  absl::StatusOr<SftResult> result = RunSft(config, *model, tok_, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->global_steps, 4);
  const double after = result->val_losses.back().second;
  EXPECT_LT(after, before);
  int adapters = 0;
  for (const auto& item : model->named_parameters()) {
    auto it = base.find(item.key());
    if (it == base.end()) {
      ++adapters;  // lora_A / lora_B
      continue;
    }
    EXPECT_TRUE(at::equal(item.value(), it->second)) << item.key();
  }
  EXPECT_GT(adapters, 0);

  absl::StatusOr<models::HfCheckpoint> merged =
      models::LoadHfCheckpoint(result->final_model_dir);
  ASSERT_TRUE(merged.ok()) << merged.status();
  for (const auto& [name, t] : merged->tensors) {
    EXPECT_EQ(name.find("lora_"), std::string::npos) << name;
  }
  SftTrainerConfig load;
  load.mutable_model()->set_partial_pretrain(result->final_model_dir);
  absl::StatusOr<SftModel> reloaded = LoadSftModel(load);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_NEAR(*SftEvalLoss(*reloaded->model, val, 8, nullptr), after, 1e-4);

  // The PEFT adapter on a fresh copy of the base gives the same loss.
  auto fresh = Model();
  absl::StatusOr<models::LoraConfig> adapter =
      models::LoadLoraAdapter(*fresh, dir + "/global_step_4/lora_adapter");
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  EXPECT_EQ(adapter->rank, 4);
  EXPECT_NEAR(*SftEvalLoss(*fresh, val, 8, nullptr), after, 1e-4);
}

}  // namespace
}  // namespace verl::rl
