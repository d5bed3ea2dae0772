#include "verl/rl/data/rl_dataset.h"

#include <cstdlib>
#include <fstream>
#include <set>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/rl/data/geo_map_task.h"
#include "verl/rl/data/parquet/dataset_file.h"
#include "verl/rl/data/synthetic_tasks.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

std::string TempPath(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name;
}

std::string WriteRows(const std::string& name, int64_t n, uint64_t seed = 0) {
  ArithmeticTaskOptions o;
  o.num_rows = n;
  o.seed = seed;
  const std::string path = TempPath(name);
  EXPECT_TRUE(core::WriteJsonlAtomic(path, MakeArithmeticRows(o)).ok());
  return path;
}

TEST(RLDatasetTest, LoadsAndConcatenatesFiles) {
  RLDatasetOptions o;
  o.files = {WriteRows("a.jsonl", 5), WriteRows("b.jsonl", 7, 1)};
  auto ds = RLDataset::Load(o);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->size(), 12);
  EXPECT_EQ(ds->row(0)["data_source"], "arithmetic");
}

// verl's own format: .parquet files (by extension) mixed with JSONL in one
// file list load the same rows.
TEST(RLDatasetTest, LoadsParquetAndJsonlByExtension) {
  ArithmeticTaskOptions a;
  a.num_rows = 9;
  const std::vector<nlohmann::json> rows = MakeArithmeticRows(a);
  const std::string pq = TempPath("rows.parquet");
  ASSERT_TRUE(parquet::WriteDatasetFile(pq, rows).ok());
  EXPECT_EQ(core::ReadFile(pq)->substr(0, 4), "PAR1");
  RLDatasetOptions o;
  o.files = {pq, WriteRows("rows.jsonl", 9)};
  auto ds = RLDataset::Load(o);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ(ds->size(), 18);
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(ds->row(i), rows[i]) << i;
    EXPECT_EQ(ds->row(i + 9), rows[i]) << i;
  }
  o.files = {TempPath("missing.parquet")};
  auto missing = RLDataset::Load(o);
  ASSERT_THAT(missing,
              StatusIs(absl::StatusCode::kNotFound, "cannot open for reading"));
  EXPECT_NE(missing.status().message().find("missing.parquet"),
            std::string::npos);
}

TEST(RLDatasetTest, MaxSamplesAndFilter) {
  RLDatasetOptions o;
  o.files = {WriteRows("c.jsonl", 50)};
  o.max_samples = 10;
  auto ds = RLDataset::Load(o);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds->size(), 10);

  o.max_samples = -1;
  o.filter_overlong_prompts = true;
  o.max_prompt_length = 6;
  o.prompt_length = [](const nlohmann::json& row) {
    return static_cast<int64_t>(
        row["prompt"][0]["content"].get<std::string>().size());
  };
  auto filtered = RLDataset::Load(o);
  ASSERT_TRUE(filtered.ok());
  for (const auto& row : filtered->rows()) {
    EXPECT_LE(row["prompt"][0]["content"].get<std::string>().size(), 6u);
  }
  EXPECT_LT(filtered->size(), 50);
  EXPECT_GT(filtered->size(), 0);
}

TEST(RLDatasetTest, MalformedRowsNameFileAndLine) {
  const std::string path = TempPath("bad.jsonl");
  struct Case {
    std::string line;
    std::string expect;
  } cases[] = {
      {R"({"prompt": "hi", "data_source": "x"})", "non-empty list"},
      {R"({"prompt": [], "data_source": "x"})", "non-empty list"},
      {R"({"prompt": [{"role": "user"}], "data_source": "x"})", "role"},
      {R"({"prompt": [{"role": "user", "content": "q"}]})", "data_source"},
      {R"([1, 2])", "not a JSON object"},
  };
  for (const auto& c : cases) {
    std::ofstream(path)
        << R"({"prompt": [{"role": "user", "content": "q"}], "data_source": "x"})"
        << "\n"
        << c.line << "\n";
    RLDatasetOptions o;
    o.files = {path};
    auto ds = RLDataset::Load(o);
    ASSERT_THAT(ds, StatusIs(absl::StatusCode::kInvalidArgument)) << c.line;
    EXPECT_NE(ds.status().message().find("bad.jsonl:2"), std::string::npos)
        << ds.status();
    EXPECT_NE(ds.status().message().find(c.expect), std::string::npos)
        << ds.status();
  }
  RLDatasetOptions missing;
  missing.files = {TempPath("nope.jsonl")};
  EXPECT_EQ(RLDataset::Load(missing).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DataLoaderTest, EpochsCoverDatasetAndShuffleDiffers) {
  RLDataset ds(MakeArithmeticRows({.num_rows = 10}));
  DataLoader loader(&ds, 3, /*shuffle=*/true, /*seed=*/7, /*drop_last=*/true);
  EXPECT_EQ(loader.num_batches(), 3);
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 2; ++e) {
    std::vector<int64_t> seen;
    while (auto batch = loader.Next()) {
      EXPECT_EQ(batch->size(), 3u);
      for (const auto& row : *batch) seen.push_back(row["extra_info"]["index"]);
    }
    EXPECT_EQ(seen.size(), 9u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 9u);
    epochs.push_back(seen);
  }
  EXPECT_NE(epochs[0], epochs[1]);
}

TEST(DataLoaderTest, RestoredStateContinuesExactly) {
  RLDataset ds(MakeArithmeticRows({.num_rows = 20}));
  DataLoader a(&ds, 4, true, 3, true);
  for (int i = 0; i < 7; ++i) a.Next();  // crosses an epoch boundary
  auto state = DataLoaderState::FromJson(a.state().ToJson());
  ASSERT_TRUE(state.ok());
  DataLoader b(&ds, 4, true, 3, true);
  b.set_state(*state);
  for (int i = 0; i < 10; ++i) {
    auto x = a.Next();
    auto y = b.Next();
    ASSERT_EQ(x.has_value(), y.has_value());
    if (x) {
      EXPECT_EQ(*x, *y);
    }
  }
  EXPECT_THAT(DataLoaderState::FromJson({{"epoch", 1}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "dataloader state needs integer \"epoch\" and"));
  EXPECT_THAT(
      DataLoaderState::FromJson({{"epoch", -1}, {"batches_in_epoch", 0}}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "dataloader state has negative position"));
}

TEST(DataLoaderTest, NoShuffleNoDropLastKeepsTail) {
  RLDataset ds(MakeArithmeticRows({.num_rows = 5}));
  DataLoader loader(&ds, 2, false, 0, false);
  EXPECT_EQ(loader.num_batches(), 3);
  std::vector<size_t> sizes;
  while (auto b = loader.Next()) sizes.push_back(b->size());
  EXPECT_EQ(sizes, (std::vector<size_t>{2, 2, 1}));
  DataLoader whole(&ds, 0, false, 0, false);
  EXPECT_EQ(whole.num_batches(), 1);
}

}  // namespace
}  // namespace verl::rl

namespace verl::rl {
namespace {

TEST(RLDatasetTest, BuiltinTasksNeedNoFiles) {
  RLDatasetOptions o;
  o.files = {"builtin:arithmetic/train"};
  auto train = RLDataset::Load(o);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->size(), kBuiltinTrainRows);
  EXPECT_EQ(train->rows(), MakeArithmeticRows({.num_rows = kBuiltinTrainRows}));
  o.files = {"builtin:countdown/test"};
  auto test = RLDataset::Load(o);
  ASSERT_TRUE(test.ok());
  EXPECT_EQ(test->size(), kBuiltinTestRows);
  EXPECT_EQ(test->row(0)["extra_info"]["split"], "test");
  o.files = {"builtin:sudoku/train"};
  EXPECT_NE(RLDataset::Load(o).status().message().find("unknown built-in task"),
            std::string::npos);
  o.files = {"builtin:arithmetic/train?max_operand=9&ops=+&rows=50&seed=2"};
  auto small = RLDataset::Load(o);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->size(), 50);
  for (const auto& row : small->rows()) {
    const std::string q = row["prompt"][0]["content"];
    EXPECT_LE(q.size(), 6u) << q;  // "a+b=?" with one-digit operands
    EXPECT_NE(q.find('+'), std::string::npos);
  }
  o.files = {"builtin:arithmetic/train?colour=red"};
  EXPECT_NE(RLDataset::Load(o).status().message().find("unknown option"),
            std::string::npos);
  o.files = {"builtin:arithmetic/train?rows=-3"};
  EXPECT_NE(RLDataset::Load(o).status().message().find("rows=-3"),
            std::string::npos);
  o.files = {"builtin:multiples/test?rows=7&max_k=4&min_answers=5"};
  auto multiples = RLDataset::Load(o);
  ASSERT_TRUE(multiples.ok()) << multiples.status();
  EXPECT_EQ(multiples->rows(), MakeMultiplesRows({.num_rows = 7,
                                                  .seed = 1000003,
                                                  .max_k = 4,
                                                  .min_answers = 5,
                                                  .split = "test"}));
  o.files = {"builtin:multiples/train?min_answers=40"};
  EXPECT_NE(RLDataset::Load(o).status().message().find("no multiples"),
            std::string::npos);
  o.files = {"builtin:arithmetic/dev"};
  EXPECT_NE(RLDataset::Load(o).status().message().find("split"),
            std::string::npos);
  // geo_map's types ('+'-separated) and districts reach the generator.
  o.files = {"builtin:geo_map/test?rows=5&types=quadrant+bearing&districts=1"};
  auto geo = RLDataset::Load(o);
  ASSERT_TRUE(geo.ok()) << geo.status();
  GeoMapTaskOptions g;
  g.num_rows = 5;
  g.seed = 1000003;
  g.split = "test";
  g.question_types = {"quadrant", "bearing"};
  g.districts = true;
  EXPECT_EQ(geo->rows(), *MakeGeoMapRows(g));
  o.files = {"builtin:geo_map/test?rows=5&types=quadrant+heading"};
  EXPECT_NE(RLDataset::Load(o).status().message().find("heading"),
            std::string::npos);
}

}  // namespace
}  // namespace verl::rl
