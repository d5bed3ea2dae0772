// Parquet reader/writer throughput on verl-like rows (GSM8K-sized prompts):
// rows/s and MB/s of file for reading an independent fixture, writing and
// reading 10k rows. Run: bazel run //verl/rl/data/parquet:parquet_benchmark
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "verl/core/file_util.h"
#include "verl/rl/data/parquet/parquet_reader.h"
#include "verl/rl/data/parquet/parquet_writer.h"

namespace verl::rl::parquet {
namespace {

using nlohmann::json;

std::vector<json> GsmLikeRows(int n) {
  std::vector<json> rows;
  for (int i = 0; i < n; ++i) {
    const std::string q =
        "Natalia sold clips to " + std::to_string(i) +
        " of her friends in April, and then she sold half as many clips in "
        "May. How many clips did Natalia sell altogether in April and May? "
        "Let's think step by step and output the final answer after \"####\".";
    rows.push_back({{"data_source", "openai/gsm8k"},
                    {"prompt", {{{"role", "user"}, {"content", q}}}},
                    {"ability", "math"},
                    {"reward_model",
                     {{"style", "rule"}, {"ground_truth", std::to_string(i)}}},
                    {"extra_info",
                     {{"split", "train"},
                      {"index", i},
                      {"answer", q.substr(0, 120)},
                      {"question", q}}}});
  }
  return rows;
}

void BM_WriteRows(benchmark::State& state) {
  const std::vector<json> rows = GsmLikeRows(10000);
  size_t bytes = 0;
  for (auto _ : state) {
    auto out = SerializeParquet(rows);
    bytes = out->size();
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * rows.size());
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK(BM_WriteRows)->Unit(benchmark::kMillisecond);

void BM_ReadRows(benchmark::State& state) {
  const std::string file = *SerializeParquet(GsmLikeRows(10000));
  for (auto _ : state) {
    auto r = ParquetReader::FromBytes(file);
    auto rows = r->ReadAll();
    benchmark::DoNotOptimize(rows);
  }
  state.SetItemsProcessed(state.iterations() * 10000);
  state.SetBytesProcessed(state.iterations() * file.size());
}
BENCHMARK(BM_ReadRows)->Unit(benchmark::kMillisecond);

void BM_ReadFixture(benchmark::State& state) {
  const std::string file =
      *core::ReadFile("verl/rl/data/parquet/testdata/arrow_zstd_dict.parquet");
  for (auto _ : state) {
    auto r = ParquetReader::FromBytes(file);
    auto rows = r->ReadAll();
    benchmark::DoNotOptimize(rows);
  }
  state.SetItemsProcessed(state.iterations() * 13);
}
BENCHMARK(BM_ReadFixture)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace verl::rl::parquet
