// File: verl/rl/trainer/trainer_checkpoint_test.cc
//
// Trainer checkpoints: TrainState round trips per save/load_contents,
// retention, resume modes, the world-size mismatch error, and the PPO
// trainer's exact resume (2 steps + save + resume + 2 steps == 4 steps:
// same metrics, bit-identical actor/critic/optimizer files).
#include "verl/rl/trainer/trainer_checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/ckpt/checkpoint_pt.h"
#include "verl/ckpt/merger/checkpoint_merger.h"
#include "verl/ckpt/weights_only.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/rl/trainer/ppo_trainer.h"
#include "verl/rl/trainer/testing/trainer_checkpoint_testutil.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;
namespace fs = std::filesystem;

std::string TmpDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  fs::remove_all(dir);
  return dir;
}

// A named replicated state over fixed parameters (different init per seed).
struct Toy {
  explicit Toy(uint64_t seed) {
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (auto [name, shape] :
         std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"model.w", {5, 3}}, {"model.b", {5}}, {"scale", {}}}) {
      params.emplace_back(name, at::randn(shape, gen).set_requires_grad(true));
    }
    OptimizerOptions o;
    o.lr = 0.1;
    o.lr_scheduler_type = "cosine";
    o.warmup_steps = 1;
    o.total_steps = 10;
    state = std::make_unique<ReplicatedTrainState>(params, o, nullptr);
  }
  // One AdamW step with gradients that depend on `k` and the parameters.
  void Step(int k) {
    state->ZeroGrad();
    at::Tensor loss = at::zeros({});
    for (auto& [name, p] : params) loss = loss + (p * p * (k + 1)).sum();
    loss.backward();
    ASSERT_TRUE(state->Step().ok());
    state->StepSchedule();
  }
  NamedParams params;
  std::unique_ptr<ReplicatedTrainState> state;
};

void ExpectSameTensors(const std::map<std::string, at::Tensor>& a,
                       const std::map<std::string, at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [k, v] : a) {
    ASSERT_TRUE(b.count(k)) << k;
    EXPECT_TRUE(at::equal(v, b.at(k))) << k;
  }
}

CheckpointRole Role(const std::string& name, TrainState* state,
                    std::set<std::string> save = {"model", "optimizer",
                                                  "extra"},
                    std::set<std::string> load = {}) {
  CheckpointRole r;
  r.name = name;
  r.state = state;
  r.hf_config = {{"model_type", "toy"}};
  r.save_contents = std::move(save);
  r.load_contents = std::move(load);
  return r;
}

TEST(TrainerCheckpointTest, RoundTripIsExact) {
  const std::string dir = TmpDir("round_trip");
  TrainerCheckpointOptions o;
  o.default_local_dir = dir;
  Toy a(1), b(2);
  a.Step(0);
  a.Step(1);
  TrainerCheckpointer saver(o, nullptr);
  TrainerProgress progress;
  progress.dataloader.epoch = 1;
  progress.dataloader.batches_in_epoch = 3;
  progress.trainer = {{"uid_counter", 17}};
  ASSERT_TRUE(saver
                  .Save(2,
                        {Role("actor", a.state.get(),
                              {"model", "optimizer", "extra", "hf_model"})},
                        progress)
                  .ok());
  const std::string actor = dir + "/global_step_2/actor/";
  for (const char* f :
       {"model_world_size_1_rank_0.pt", "optim_world_size_1_rank_0.pt",
        "extra_state_world_size_1_rank_0.pt", "fsdp_config.json",
        "huggingface/config.json", "huggingface/model.safetensors"}) {
    EXPECT_TRUE(fs::exists(actor + f)) << f;
  }
  EXPECT_EQ(core::ReadFile(dir + "/latest_checkpointed_iteration.txt").value(),
            "2");

  TrainerCheckpointer loader(o, nullptr);
  TrainerProgress restored;
  auto step = loader.Resume({Role("actor", b.state.get())}, &restored);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 2);
  EXPECT_EQ(restored.dataloader.epoch, 1);
  EXPECT_EQ(restored.dataloader.batches_in_epoch, 3);
  EXPECT_EQ(restored.trainer["uid_counter"], 17);
  auto sa = a.state->SaveShard(), sb = b.state->SaveShard();
  ASSERT_TRUE(sa.ok() && sb.ok());
  ExpectSameTensors(sa->model, sb->model);
  ExpectSameTensors(sa->optimizer, sb->optimizer);
  EXPECT_EQ(sb->schedule_step, 2);
  EXPECT_EQ(a.state->lr(), b.state->lr());
  // torch's layouts: the optimizer's param group and LambdaLR's state.
  ckpt::OptimizerGroup group;
  auto optim =
      ckpt::LoadPtOptimizer(actor + "optim_world_size_1_rank_0.pt", &group);
  ASSERT_TRUE(optim.ok()) << optim.status();
  EXPECT_EQ(group.param_names,
            std::vector<std::string>({"model.w", "model.b", "scale"}));
  EXPECT_EQ(group.initial_lr, 0.1);
  EXPECT_EQ(group.lr, a.state->lr());
  auto extra =
      ckpt::LoadPtExtraState(actor + "extra_state_world_size_1_rank_0.pt");
  ASSERT_TRUE(extra.ok()) << extra.status();
  EXPECT_EQ(extra->lr_scheduler_step, 2);
  EXPECT_EQ(extra->lr_scheduler_base_lr, 0.1);
  EXPECT_EQ(extra->lr_scheduler_last_lr, a.state->lr());
  for (const char* f :
       {"model_world_size_1_rank_0.pt", "optim_world_size_1_rank_0.pt",
        "extra_state_world_size_1_rank_0.pt", "../data.pt"}) {
    EXPECT_TRUE(ckpt::CheckWeightsOnlyLoadable(actor + f).ok()) << f;
  }
  // Training on from the restored state is bit-identical.
  a.Step(2);
  b.Step(2);
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_TRUE(at::equal(a.params[i].second, b.params[i].second));
  }
  // hf_model holds the full weights of step 2: the merger reproduces them.
  ckpt::MergeOptions m;
  m.local_dir = actor;
  m.target_dir = dir + "/merged";
  m.dtype = at::kFloat;
  ASSERT_TRUE(ckpt::MergeFsdpCheckpoint(m).ok());
  auto report =
      ckpt::CompareHfFolders(m.target_dir, actor + "huggingface", 0.0, 0.0);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok()) << report->mismatches[0];
  EXPECT_EQ(report->num_tensors, 3);
}

// Checkpoints written before the torch layouts (a flat optimizer dict, a
// scheduler entry with last_epoch only) still resume exactly.
TEST(TrainerCheckpointTest, OldLayoutCheckpointsStillResume) {
  const std::string dir = TmpDir("old_layout");
  TrainerCheckpointOptions o;
  o.default_local_dir = dir;
  Toy a(1), b(2);
  a.Step(0);
  a.Step(1);
  TrainerCheckpointer saver(o, nullptr);
  ASSERT_TRUE(saver.Save(2, {Role("actor", a.state.get())}, {}).ok());
  const std::string actor = dir + "/global_step_2/actor/";
  const std::string optim = actor + "optim_world_size_1_rank_0.pt";
  const std::string extra = actor + "extra_state_world_size_1_rank_0.pt";
  auto flat = ckpt::LoadPtOptimizer(optim);
  ASSERT_TRUE(flat.ok()) << flat.status();
  ASSERT_TRUE(ckpt::SavePtTensorDict(optim, *flat).ok());
  auto state = ckpt::LoadPtExtraState(extra);
  ASSERT_TRUE(state.ok()) << state.status();
  // What earlier versions wrote: {"lr_scheduler": {"last_epoch": 2}, ...}.
  nlohmann::json old_extra = {{"lr_scheduler", {{"last_epoch", 2}}},
                              {"extra_json", state->user.dump()}};
  ASSERT_TRUE(ckpt::SavePtJson(extra, old_extra).ok());
  auto old_flat = ckpt::LoadPtOptimizer(optim);
  ASSERT_TRUE(old_flat.ok()) << old_flat.status();
  ExpectSameTensors(*flat, *old_flat);

  TrainerCheckpointer loader(o, nullptr);
  TrainerProgress restored;
  auto step = loader.Resume({Role("actor", b.state.get())}, &restored);
  ASSERT_TRUE(step.ok()) << step.status();
  auto sa = a.state->SaveShard(), sb = b.state->SaveShard();
  ASSERT_TRUE(sa.ok() && sb.ok());
  ExpectSameTensors(sa->model, sb->model);
  ExpectSameTensors(sa->optimizer, sb->optimizer);
  EXPECT_EQ(sb->schedule_step, 2);
  EXPECT_EQ(a.state->lr(), b.state->lr());
  a.Step(2);
  b.Step(2);
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_TRUE(at::equal(a.params[i].second, b.params[i].second));
  }
}

// A killed run leaves its tokenizer scratch folder and a partial save;
// the next start removes both, and nothing else the user has there.
TEST(TrainerCheckpointTest, LeftoversOfKilledRunsAreRemovedAtStart) {
  const std::string dir = TmpDir("leftovers");
  fs::create_directories(dir);
  const pid_t child = fork();  // a pid that is gone
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  const std::string mine = core::ProcessTempName(".tokenizer.tmp-");
  const std::string host_prefix = mine.substr(0, mine.rfind('-') + 1);
  const std::vector<std::string> stale = {
      absl::StrCat(host_prefix, child), absl::StrCat(".tokenizer.tmp-", child),
      "global_step_3.tmp-save"};
  const std::vector<std::string> kept = {
      absl::StrCat(host_prefix, getppid()),  // a live process's
      ".tokenizer.tmp-mine", "notes.txt.d"};
  for (const auto& names : {stale, kept}) {
    for (const std::string& name : names) {
      fs::create_directories(dir + "/" + name);
      std::ofstream(dir + "/" + name + "/f") << "x";
    }
  }
  TrainerCheckpointOptions o;
  o.default_local_dir = dir;
  Toy a(1);
  TrainerCheckpointer checkpointer(o, nullptr);
  TrainerProgress progress;
  auto step = checkpointer.Resume({Role("actor", a.state.get())}, &progress);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(*step, 0);
  for (const std::string& name : stale) {
    EXPECT_FALSE(fs::exists(dir + "/" + name)) << name;
  }
  for (const std::string& name : kept) {
    EXPECT_TRUE(fs::exists(dir + "/" + name + "/f")) << name;
  }
}

TEST(TrainerCheckpointTest, SaveAndLoadContentsSubsets) {
  const std::string dir = TmpDir("contents");
  TrainerCheckpointOptions o;
  o.default_local_dir = dir;
  Toy a(1);
  a.Step(0);
  a.Step(1);
  TrainerCheckpointer ck(o, nullptr);
  ASSERT_TRUE(ck.Save(1, {Role("actor", a.state.get())}, {}).ok());
  // Model only: parameters restored, optimizer and schedule fresh.
  Toy b(2);
  TrainerProgress progress;
  auto step = ck.Resume({Role("actor", b.state.get(),
                              {"model", "optimizer", "extra"}, {"model"})},
                        &progress);
  ASSERT_TRUE(step.ok()) << step.status();
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_TRUE(at::equal(a.params[i].second, b.params[i].second));
    EXPECT_FALSE(GetAdamState(b.state->optimizer(), b.params[i].second));
  }
  EXPECT_EQ(b.state->schedule_step(), 0);
  // save_contents [model] writes no optimizer / extra files.
  ASSERT_TRUE(ck.Save(2, {Role("actor", a.state.get(), {"model"})}, {}).ok());
  EXPECT_TRUE(
      fs::exists(dir + "/global_step_2/actor/model_world_size_1_rank_0.pt"));
  EXPECT_FALSE(
      fs::exists(dir + "/global_step_2/actor/optim_world_size_1_rank_0.pt"));
  EXPECT_FALSE(fs::exists(
      dir + "/global_step_2/actor/extra_state_world_size_1_rank_0.pt"));
  // ... and loading the optimizer from it is a clear error.
  TrainerProgress p;
  auto bad = ck.Resume({Role("actor", b.state.get())}, &p);
  ASSERT_THAT(bad, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_NE(bad.status().message().find("optim_world_size_1_rank_0.pt"),
            std::string::npos)
      << bad.status();
  // save_contents without model is refused.
  EXPECT_THAT(ck.Save(3, {Role("actor", a.state.get(), {"optimizer"})}, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "checkpoint save of step 3 (begin, rank 0)"));
}

TEST(TrainerCheckpointTest, RetentionAndResumeModes) {
  const std::string dir = TmpDir("retention");
  TrainerCheckpointOptions o;
  o.default_local_dir = dir;
  o.max_ckpt_to_keep = {{"actor", 2}, {"critic", 1}};
  Toy actor(1), critic(2);
  TrainerCheckpointer ck(o, nullptr);
  for (int step = 1; step <= 4; ++step) {
    actor.Step(step);
    ASSERT_TRUE(ck.Save(step,
                        {Role("actor", actor.state.get()),
                         Role("critic", critic.state.get())},
                        {})
                    .ok());
  }
  EXPECT_FALSE(fs::exists(dir + "/global_step_1"));
  EXPECT_FALSE(fs::exists(dir + "/global_step_2"));
  EXPECT_TRUE(fs::exists(dir + "/global_step_3/actor"));
  EXPECT_FALSE(fs::exists(dir + "/global_step_3/critic"));
  EXPECT_TRUE(fs::exists(dir + "/global_step_4/actor"));
  EXPECT_TRUE(fs::exists(dir + "/global_step_4/critic"));

  TrainerProgress p;
  Toy fresh(3);
  o.resume_mode = "disable";
  EXPECT_EQ(TrainerCheckpointer(o, nullptr)
                .Resume({Role("actor", fresh.state.get())}, &p)
                .value(),
            0);
  o.resume_mode = "resume_path";
  o.resume_from_path = dir + "/global_step_3";
  EXPECT_EQ(TrainerCheckpointer(o, nullptr)
                .Resume({Role("actor", fresh.state.get())}, &p)
                .value(),
            3);
  EXPECT_EQ(fresh.state->schedule_step(), 3);
  o.resume_from_path = dir;  // not a global_step_ folder
  EXPECT_THAT(TrainerCheckpointer(o, nullptr)
                  .Resume({Role("actor", fresh.state.get())}, &p),
              StatusIs(absl::StatusCode::kInvalidArgument));
  o.resume_mode = "sometimes";
  auto bad = TrainerCheckpointer(o, nullptr)
                 .Resume({Role("actor", fresh.state.get())}, &p);
  ASSERT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument,
                            "trainer.resume_mode: unknown value 'sometimes'"));
  EXPECT_NE(bad.status().message().find("trainer.resume_mode"),
            std::string::npos);
  // auto with no checkpoint: from scratch.
  o.resume_mode = "auto";
  o.default_local_dir = TmpDir("empty");
  EXPECT_EQ(TrainerCheckpointer(o, nullptr)
                .Resume({Role("actor", fresh.state.get())}, &p)
                .value(),
            0);
}

TEST(TrainerCheckpointTest, WorldSizeMismatchNamesFilesAndSizes) {
  // A 2-rank checkpoint written by one process (both ranks' files).
  const std::string dir = TmpDir("mismatch");
  ckpt::CheckpointManagerOptions mo;
  mo.default_local_dir = dir;
  ckpt::CheckpointManager manager(mo);
  Toy a(1);
  std::map<std::string, at::Tensor> full;
  for (auto& [name, p] : a.params) full[name] = p.detach();
  const ckpt::FsdpLayout layout = ckpt::MakeFsdpLayout(full, 2);
  ASSERT_TRUE(manager.BeginSave(5).ok());
  for (int rank = 0; rank < 2; ++rank) {
    ckpt::RoleShard shard;
    shard.model = ckpt::ShardStateDict(full, layout, rank);
    ASSERT_TRUE(manager.SaveShard(5, "actor", rank, 2, shard).ok());
  }
  ckpt::RoleMeta meta;
  meta.layout = layout;
  ASSERT_TRUE(manager.SaveRoleMeta(5, "actor", meta).ok());
  ASSERT_TRUE(manager.CommitSave(5).ok());

  TrainerCheckpointOptions o;
  o.default_local_dir = dir;
  TrainerProgress p;
  auto r = TrainerCheckpointer(o, nullptr)
               .Resume({Role("actor", a.state.get())}, &p);
  ASSERT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("model_world_size_2_rank_0.pt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("saved by 2 ranks"), std::string::npos) << msg;
  EXPECT_NE(msg.find("world size 1"), std::string::npos) << msg;
}

// ---- The PPO trainer --------------------------------------------------------

PpoTrainerConfig TinyConfig(const std::string& experiment, int64_t steps,
                            const std::string& ckpt_dir) {
  auto config =
      CheckpointTestConfig(experiment, steps, /*save_freq=*/2, ckpt_dir);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

std::map<int64_t, nlohmann::json> StepLogs(const std::string& path) {
  std::ifstream in(path);
  std::map<int64_t, nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line);
    out[j["step"].get<int64_t>()] = j["data"];
  }
  return out;
}

void ExpectSameStepMetrics(const nlohmann::json& a, const nlohmann::json& b) {
  int compared = 0;
  for (const auto& [k, v] : a.items()) {
    if (k.rfind("timing", 0) == 0 || k.rfind("perf/", 0) == 0) continue;
    ASSERT_TRUE(b.contains(k)) << k;
    EXPECT_EQ(v, b[k]) << k;
    ++compared;
  }
  EXPECT_GT(compared, 20);
}

void ExpectSameCheckpointFiles(const std::string& a, const std::string& b) {
  for (const char* role : {"actor", "critic"}) {
    for (const char* kind : {"model", "optim"}) {
      const std::string f =
          absl::StrCat("/", role, "/", kind, "_world_size_1_rank_0.pt");
      ckpt::OptimizerGroup ga, gb;
      auto load = [&](const std::string& path, ckpt::OptimizerGroup* g) {
        return std::string(kind) == "model" ? ckpt::LoadPtTensorDict(path)
                                            : ckpt::LoadPtOptimizer(path, g);
      };
      auto ta = load(a + f, &ga), tb = load(b + f, &gb);
      ASSERT_TRUE(ta.ok() && tb.ok()) << f;
      ExpectSameTensors(*ta, *tb);
      EXPECT_EQ(ga.param_names, gb.param_names) << f;
      EXPECT_EQ(ga.lr, gb.lr) << f;
    }
    const std::string f =
        absl::StrCat("/", role, "/extra_state_world_size_1_rank_0.pt");
    auto ea = ckpt::LoadPtExtraState(a + f), eb = ckpt::LoadPtExtraState(b + f);
    ASSERT_TRUE(ea.ok() && eb.ok()) << f;
    EXPECT_EQ(ea->lr_scheduler_step, eb->lr_scheduler_step);
    EXPECT_EQ(ea->lr_scheduler_last_lr, eb->lr_scheduler_last_lr);
    EXPECT_EQ(ea->user, eb->user);
  }
  EXPECT_EQ(ckpt::LoadPtJson(a + "/data.pt").value(),
            ckpt::LoadPtJson(b + "/data.pt").value());
}

// Every .pt the trainer wrote under `root` loads with
// torch.load(weights_only=True) (no GLOBAL or opcode outside its lists).
void ExpectTorchLoadable(const std::string& root) {
  int files = 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.path().extension() != ".pt") continue;
    ++files;
    const absl::Status s = ckpt::CheckWeightsOnlyLoadable(e.path().string());
    EXPECT_TRUE(s.ok()) << s;
  }
  EXPECT_GE(files, 7) << root;  // (model, optim, extra) x 2 roles, data.pt
}

TEST(TrainerCheckpointTest, PpoResumeIsExact) {
  const std::string logs = TmpDir("logs");
  setenv("VERL_FILE_LOGGER_ROOT", logs.c_str(), 1);
  const std::string straight = TmpDir("straight"), split = TmpDir("split");
  auto full = RunPpo(TinyConfig("straight", 4, straight), nullptr);
  ASSERT_TRUE(full.ok()) << full.status();
  // 2 steps, with the full HF model in the actor's checkpoint.
  PpoTrainerConfig first = TinyConfig("split", 2, split);
  first.mutable_actor_rollout_ref()
      ->mutable_actor()
      ->mutable_checkpoint()
      ->add_save_contents("hf_model");
  auto part = RunPpo(first, nullptr);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ(part->steps, 2);
  const std::string hf = split + "/global_step_2/actor/huggingface/";
  for (const char* f :
       {"config.json", "generation_config.json", "tokenizer.json",
        "tokenizer_config.json", "model.safetensors"}) {
    EXPECT_TRUE(fs::exists(hf + f)) << f;
  }
  EXPECT_TRUE(
      fs::exists(split + "/global_step_2/critic/huggingface/config.json"));
  // The preset's eos id and the tokenizer's are the same id: written once.
  auto config = core::ReadJsonFile(hf + "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE((*config)["eos_token_id"].is_number_integer())
      << (*config)["eos_token_id"];
  auto rest = RunPpo(TinyConfig("split", 4, split), nullptr);  // resume auto
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(rest->steps, 4);

  ExpectSameCheckpointFiles(straight + "/global_step_4",
                            split + "/global_step_4");
  ExpectTorchLoadable(split);
  auto a = StepLogs(logs + "/ckpt/straight.jsonl");
  auto b = StepLogs(logs + "/ckpt/split.jsonl");
  ASSERT_TRUE(a.count(3) && a.count(4) && b.count(3) && b.count(4));
  ExpectSameStepMetrics(a[3], b[3]);
  ExpectSameStepMetrics(a[4], b[4]);
  EXPECT_TRUE(a[2].contains("timing_s/save_checkpoint"));
  // Figures for docs/checkpoints.md.
  uint64_t bytes = 0;
  for (const auto& e :
       fs::recursive_directory_iterator(straight + "/global_step_4")) {
    if (e.is_regular_file()) bytes += e.file_size();
  }
  std::cout << "checkpoint of step 4 (actor + critic, tiny-qwen2): " << bytes
            << " bytes; save took " << a[4]["timing_s/save_checkpoint"]
            << " s of a " << a[4]["timing_s/step"] << " s step\n";
}

}  // namespace
}  // namespace verl::rl
