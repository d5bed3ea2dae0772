// File: verl/rl/rewards/reward_score/reward_score_fuzz_test.cc
//
// Runs the libFuzzer entry over hand-picked malformed inputs and random
// mutations of them (no libFuzzer needed).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int RunEntry(const std::string& s) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()),
                                s.size());
}

std::vector<std::string> Seeds() {
  const std::string nul(1, '\0');
  return {
      "",
      std::string(1, '\x01') + "\\boxed{" + nul + "1",
      std::string(1, '\x01') + "\\boxed{\\frac" + nul + "\\frac",
      std::string(1, '\x01') + "\\boxed{\\sqrt}" + nul + "\\sqrt",
      std::string(1, '\x01') + std::string(5000, '{') + nul + "x",
      std::string(1, '\x01') + "\\boxed 1/2$" + nul + "99999999999999999999/2",
      std::string(1, '\x02') + "Answer: $$$$" + nul + "=",
      std::string(1, '\x02') + "Answer: \\fracx" + nul + "\\sqrt",
      std::string(1, '\x00') + "#### 1,2,3" + nul + "123",
      std::string(1, '\x05') + "<answer>((((((((1" + nul +
          "{\"target\": 1, \"numbers\": [1]}",
      std::string(1, '\x05') + "<answer>" + std::string(1000, '(') + "1" + nul +
          "{\"target\": 1, \"numbers\": [1]}",
      std::string(1, '\x05') + "<answer>99999999999999999999*9</answer>" + nul +
          "{\"target\": 1, \"numbers\": [99999]}",
      std::string(1, '\x04') + "<answer>\xff\xfe</answer>" + nul +
          "{\"target\": [\"\xff\"]}",
      std::string(1, '\x06') + "#### 99999999999999999999999" + nul + "1",
      std::string(1, '\x03') + "<think></think>\\boxed{\xc3}" + nul + "\xc3",
      std::string(1, '\x07') + "answer:\xe2\x82" + nul + "\xe2\x82",
  };
}

TEST(RewardScoreFuzzTest, SeedsAndMutations) {
  std::vector<std::string> seeds = Seeds();
  for (const std::string& s : seeds) EXPECT_EQ(RunEntry(s), 0);
  std::mt19937 rng(7);
  for (int i = 0; i < 3000; ++i) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + rng() % 8;
    for (int e = 0; e < edits; ++e) {
      const size_t pos = s.empty() ? 0 : rng() % (s.size() + 1);
      switch (rng() % 3) {
        case 0:
          s.insert(s.begin() + pos, static_cast<char>(rng() % 256));
          break;
        case 1:
          if (pos < s.size()) s.erase(pos, 1 + rng() % 4);
          break;
        default:
          if (pos < s.size()) s[pos] = static_cast<char>(rng() % 256);
      }
    }
    ASSERT_EQ(RunEntry(s), 0);
  }
}

}  // namespace
