// File: verl/models/decoder_hooks_test.cc
//
// The decoder's LayerHooks seam (what FSDP's per-layer gather/free hangs
// on): the calls arrive in forward/backward order, BeforeBackward(i) comes
// before any gradient of layer i and AfterBackward(i) after all of them,
// no-grad forwards get no backward calls, and the hooks leave the gradients
// unchanged (plain backward, gradient checkpointing, MoE router logits).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/models/decoder.h"
#include "verl/models/presets.h"

namespace verl::models {
namespace {

// Records calls as "F-1", "F0", "A0", "B1", "P1" (P: AfterBackward) and
// whether layer i's parameters had gradients at each backward call.
class RecordingHooks : public LayerHooks {
 public:
  explicit RecordingHooks(CausalLM* model) : model_(model) {}
  void BeforeForward(int64_t stage) override { Log("F", stage); }
  void AfterForward(int64_t layer) override { Log("A", layer); }
  void BeforeBackward(int64_t layer) override {
    Log("B", layer);
    if (LayerHasGrads(layer)) grads_before_backward_ = true;
  }
  void AfterBackward(int64_t layer) override {
    Log("P", layer);
    if (!LayerHasGrads(layer)) missing_grads_after_backward_ = true;
  }

  std::vector<std::string> calls;
  bool grads_before_backward_ = false;
  bool missing_grads_after_backward_ = false;

 private:
  void Log(const char* what, int64_t i) {
    calls.push_back(absl::StrCat(what, i));
  }
  // Every trainable parameter of the layer that autograd reached has a
  // gradient (MoE experts without tokens are not reached: skip undefined
  // ones only if no parameter of the layer has any).
  bool LayerHasGrads(int64_t layer) const {
    bool all = true;
    for (const at::Tensor& p : model_->model->layers[layer]->parameters()) {
      if (!p.grad().defined()) all = false;
    }
    return all;
  }
  CausalLM* model_;
};

ModelConfig Preset(const std::string& name) {
  absl::StatusOr<ModelConfig> c = MakePreset(name);
  CHECK(c.ok()) << c.status();
  return *c;
}

// Loss of one packed forward over two sequences (plus the MoE aux loss).
at::Tensor Loss(CausalLM& model) {
  at::Tensor ids = at::arange(11, at::kLong).remainder(97) + 3;
  at::Tensor pos =
      at::cat({at::arange(5, at::kLong), at::arange(6, at::kLong)});
  ForwardOutput out = model.ForwardPacked(ids, pos, {0, 5, 11});
  at::Tensor loss = out.logits.pow(2).mean();
  if (out.aux_loss.defined()) loss = loss + 0.1 * out.aux_loss;
  return loss;
}

std::map<std::string, at::Tensor> Grads(CausalLM& model) {
  std::map<std::string, at::Tensor> g;
  for (const auto& it : model.named_parameters()) {
    if (it.value().grad().defined()) g[it.key()] = it.value().grad().clone();
  }
  return g;
}

void CheckHooks(const std::string& preset, bool checkpointing) {
  SCOPED_TRACE(preset + (checkpointing ? " checkpointed" : " plain"));
  const ModelConfig cfg = Preset(preset);
  auto plain = CreateModel(cfg, 3);
  auto hooked = CreateModel(cfg, 3);
  plain->enable_gradient_checkpointing(checkpointing);
  hooked->enable_gradient_checkpointing(checkpointing);
  auto hooks = std::make_shared<RecordingHooks>(hooked.get());
  hooked->set_layer_hooks(hooks);
  ASSERT_EQ(hooked->layer_hooks(), hooks.get());

  Loss(*plain).backward();
  Loss(*hooked).backward();
  std::vector<std::string> want = {"F-1"};
  const int64_t n = cfg.num_hidden_layers;
  for (int64_t i = 0; i < n; ++i) {
    want.push_back(absl::StrCat("F", i));
    want.push_back(absl::StrCat("A", i));
  }
  for (int64_t i = n - 1; i >= 0; --i) {
    want.push_back(absl::StrCat("B", i));
    want.push_back(absl::StrCat("P", i));
  }
  EXPECT_EQ(hooks->calls, want);
  EXPECT_FALSE(hooks->grads_before_backward_);
  if (cfg.num_experts == 0) {
    EXPECT_FALSE(hooks->missing_grads_after_backward_);
  }

  const auto want_grads = Grads(*plain);
  const auto got_grads = Grads(*hooked);
  ASSERT_EQ(want_grads.size(), got_grads.size());
  for (const auto& [name, g] : want_grads) {
    EXPECT_TRUE(at::equal(g, got_grads.at(name))) << name;
  }

  // No grad: forward calls only.
  hooks->calls.clear();
  {
    torch::NoGradGuard no_grad;
    Loss(*hooked);
  }
  EXPECT_EQ(hooks->calls.size(), static_cast<size_t>(1 + 2 * n));
  hooked->set_layer_hooks(nullptr);
  EXPECT_EQ(hooked->layer_hooks(), nullptr);
}

TEST(DecoderHooksTest, DenseOrderAndGradients) {
  CheckHooks("tiny-qwen2", false);
}

TEST(DecoderHooksTest, CheckpointedOrderAndGradients) {
  CheckHooks("tiny-llama3", true);
}

TEST(DecoderHooksTest, MoeRouterLogitsAreCovered) {
  CheckHooks("tiny-qwen2-moe", false);
}

}  // namespace
}  // namespace verl::models
