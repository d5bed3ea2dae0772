// File: verl/core/config_loader_fuzz_test.cc
//
// Runs the fuzz entry (config_loader_fuzz.cc) over every truncation and
// byte substitution of a valid input and over seeded random inputs built
// from the syntax's own characters, so CI exercises it without libFuzzer.
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "verl/core/config_loader.h"
#include "verl/core/config_loader_test.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace verl::core {
namespace {

int RunEntry(const std::string& bytes) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                                bytes.size());
}

const std::string& Seed() {
  static const std::string* const kSeed = new std::string(
      std::string("title: \"t\"\nids: [1, 2]\ninner {\n  rate: 0.25\n"
                  "  color: blue\n  tags: [\"a\"]\n"
                  "  extra { key: \"k\" value: \"v\" }\n}\n#@null other\n") +
      '\0' +
      "size=3\ninner.tags=[x,'y,z']\ninner.extra.q=1\ninner.leaf=null\n"
      "inner.steps=null\nids=[]");
  return *kSeed;
}

TEST(ConfigLoaderFuzzTest, SeedTruncationsAndSubstitutions) {
  const std::string seed = Seed();
  // The seed itself loads (so mutations start from the accepting path).
  testing::TestConfig config;
  MaterializeDefaults(&config);
  const size_t nul = seed.find('\0');
  ASSERT_TRUE(MergeTextProto(seed.substr(0, nul), "seed", &config).ok());
  ASSERT_TRUE(
      ApplyOverrides(absl::StrSplit(seed.substr(nul + 1), '\n'), &config).ok());
  EXPECT_EQ(config.size(), 3);
  EXPECT_FALSE(config.has_other());
  EXPECT_EQ(RunEntry(seed), 0);
  for (size_t n = 0; n <= seed.size(); ++n) RunEntry(seed.substr(0, n));
  const std::string replacements = std::string("\n{}[]:=,.'\"#@ xa0-") + '\0';
  ASSERT_EQ(replacements.size(), 19u);
  for (size_t i = 0; i < seed.size(); ++i) {
    for (char c : replacements) {
      std::string mutated = seed;
      mutated[i] = c;
      RunEntry(mutated);
    }
  }
}

TEST(ConfigLoaderFuzzTest, SeededRandomInputs) {
  const std::string alphabet = std::string("{}[]:=,.'\"#@ \n-+eE0123456789") +
                               '\0' + "abcdefghijklmnopqrstuvwxyz_";
  const std::vector<std::string> words = {
      "title", "size", "ids",   "inner", "other", "rate",  "steps",  "flag",
      "color", "tags", "extra", "leaf",  "name",  "count", "scale",  "key",
      "value", "null", "true",  "red",   "1e9",   "-1",    "#@null "};
  std::mt19937 rng(1234);
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::string input;
    const int pieces = std::uniform_int_distribution<int>(1, 24)(rng);
    for (int p = 0; p < pieces; ++p) {
      if (rng() % 2 == 0) {
        input += words[rng() % words.size()];
      } else {
        input += alphabet[rng() % alphabet.size()];
      }
    }
    EXPECT_EQ(RunEntry(input), 0);
  }
}

}  // namespace
}  // namespace verl::core
