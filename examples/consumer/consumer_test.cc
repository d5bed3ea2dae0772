// Uses two of verl-cpp's public targets from another workspace:
// @verl//verl/rl/algos:core_algos computes GRPO advantages (checked against
// the formula computed here), and @verl//verl/ckpt:safetensors writes them to
// a file and reads it back (the file's layout is checked independently:
// 8-byte little-endian header length, JSON header, data).
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "verl/ckpt/safetensors.h"
#include "verl/rl/algos/core_algos.h"

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp ? tmp : "/tmp") + "/x.safetensors";
  // Four responses of three tokens, outcome reward on the last token; rows
  // 0-2 share a prompt (uid "a"), row 3 is alone. Row 1's last token is
  // padding (mask 0), so its score is 0 as well.
  at::Tensor rewards = at::zeros({4, 3}, at::kFloat);
  rewards.select(1, 2).copy_(at::tensor({1.0f, 0.0f, 0.0f, 0.5f}));
  at::Tensor mask = at::ones({4, 3}, at::kFloat);
  mask[1][2] = 0;
  const auto adv = verl::rl::ComputeGrpoOutcomeAdvantage(
      rewards, mask, {"a", "a", "a", "b"}, /*norm_adv_by_std=*/true);
  // GRPO by hand: group a scores {1, 0, 0}: mean 1/3, unbiased std
  // sqrt(1/3); a singleton group keeps its score (mean 0, std 1).
  const double mu = 1.0 / 3, sd = std::sqrt(1.0 / 3), eps = 1e-6;
  const double want[4] = {(1 - mu) / (sd + eps), -mu / (sd + eps),
                          -mu / (sd + eps), 0.5 / (1 + eps)};
  for (int r = 0; r < 4; ++r) {
    for (int t = 0; t < 3; ++t) {
      const double got = adv.advantages[r][t].item<double>();
      const double w = want[r] * mask[r][t].item<double>();
      if (std::abs(got - w) > 1e-5) {
        return Fail("advantage[" + std::to_string(r) + "][" +
                    std::to_string(t) + "] = " + std::to_string(got) +
                    ", want " + std::to_string(w));
      }
    }
  }
  const at::Tensor x = adv.advantages;

  if (auto st = verl::ckpt::SaveSafetensors(path, {{"x", x}}); !st.ok()) {
    return Fail(std::string(st.message()));
  }
  auto loaded = verl::ckpt::LoadSafetensors(path);
  if (!loaded.ok()) return Fail(std::string(loaded.status().message()));
  if (!at::equal(loaded->at("x"), x)) return Fail("round trip differs");

  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string bytes = buf.str();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | static_cast<uint8_t>(bytes[i]);
  const std::string header = bytes.substr(8, n);
  if (bytes.size() != 8 + n + 12 * sizeof(float)) return Fail("file size");
  if (header.find("\"F32\"") == std::string::npos ||
      header.find("[4,3]") == std::string::npos) {
    return Fail("header " + header);
  }
  std::printf("GRPO advantages match; safetensors round trip ok (%zu bytes)\n",
              bytes.size());
  return 0;
}
