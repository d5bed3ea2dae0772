// Runs the libFuzzer entry (tokenizer_fuzz.cc) over real seeds and seeded
// random mutations of them, without libFuzzer.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace verl::models {
namespace {

void RunEntry(char target, const std::string& input) {
  std::string buf(1, target);
  buf += input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(buf.data()),
                         buf.size());
}

std::string Mutate(std::string s, std::mt19937* rng) {
  static const char kBytes[] = "{}[]%#-|()'\",:0 a\\\n\x80\xC3\xFF";
  for (int edit = 0, n = 1 + (*rng)() % 4; edit < n; ++edit) {
    if (s.empty()) s = "x";
    size_t pos = (*rng)() % s.size();
    switch ((*rng)() % 3) {
      case 0:
        s.erase(pos, 1 + (*rng)() % 8);
        break;
      case 1:
        s.insert(pos, s.substr((*rng)() % s.size(), 1 + (*rng)() % 8));
        break;
      default:
        s[pos] = kBytes[(*rng)() % (sizeof(kBytes) - 1)];
    }
  }
  return s;
}

TEST(TokenizerFuzzTest, SeedsAndMutationsRunCleanly) {
  const std::string testdata = "verl/models/tokenizer/testdata/";
  std::vector<std::pair<char, std::string>> seeds = {
      {0, BuiltinTokenizerJson()},
      {1, BuiltinTokenizerConfigJson()},
      {3, "Hello, world! 12345  \n\n  x = y * 2; 你好 😀 e\xCC\x81 \xFF\xC0"},
      {3, std::string(2000, ' ') + "a"},
  };
  for (const char* name :
       {"qwen2_5_chat_template.jinja", "llama3_chat_template.jinja",
        "jinja_features.jinja"}) {
    auto source = core::ReadFile(testdata + name);
    ASSERT_TRUE(source.ok()) << source.status();
    seeds.emplace_back(2, *source);
  }
  // Malformed seeds.
  for (const char* bad : {"", "{", "null", "[]", "{\"model\": {}}",
                          "{\"model\": {\"vocab\": {}, \"merges\": [1]}}"}) {
    seeds.emplace_back(0, bad);
    seeds.emplace_back(1, bad);
  }
  for (const char* bad : {"{{", "{% if %}", "{% for %}", "{{ a[::0] }}",
                          "{{ 1 / 0 }}", "{{ x.y.z() }}", "{{ '\\u12' }}",
                          "{% macro m(a=) %}{% endmacro %}", "{%- -%}"}) {
    seeds.emplace_back(2, bad);
  }
  std::mt19937 rng(2024);
  for (const auto& [target, seed] : seeds) {
    RunEntry(target, seed);
    for (int k = 0; k < 60; ++k) RunEntry(target, Mutate(seed, &rng));
  }
  // Random ASCII round-trips exactly through the built-in tokenizer.
  for (int k = 0; k < 300; ++k) {
    std::string s;
    for (int n = rng() % 64; n > 0; --n) s += static_cast<char>(rng() % 128);
    RunEntry(3, s);
  }
}

}  // namespace
}  // namespace verl::models
