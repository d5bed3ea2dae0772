// prepare_data: writes verl-format RL/SFT datasets as Parquet (verl's
// format, --format=parquet) or JSONL (default).
//
//   bazel run //tools:prepare_data -- --task=arithmetic --output_dir=/tmp/data
//   bazel run //tools:prepare_data -- --task=gsm8k --input_dir=~/gsm8k_raw
//   --output_dir=... --format=parquet
//
// Built-in tasks (arithmetic, countdown, multiples, and geo_map: grid-map
// images with geospatial questions for vision-language models, the PNGs
// inline in Parquet or under <output_dir>/images for JSONL) are generated
// from a seed;
// gsm8k and math convert the public raw records (train.jsonl, test.jsonl with
// {question, answer} / MATH-lighteval's {problem, solution, level, type})
// the way verl's examples/data_preprocess/gsm8k.py and math_dataset.py do.
// Writes train.<format> and test.<format>; the Parquet files have pyarrow's
// schema for verl's rows.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "verl/core/file_util.h"
#include "verl/core/main_guard.h"
#include "verl/core/status.h"
#include "verl/rl/data/geo_map_task.h"
#include "verl/rl/data/parquet/dataset_file.h"
#include "verl/rl/data/preprocess.h"
#include "verl/rl/data/synthetic_tasks.h"

ABSL_FLAG(std::string, task, "arithmetic",
          "arithmetic | countdown | multiples | geo_map | gsm8k | math");
ABSL_FLAG(std::string, output_dir, "",
          "folder for train.<format> and test.<format>");
ABSL_FLAG(std::string, format, "jsonl",
          "jsonl | parquet (verl's format: snappy, pyarrow's schema)");
ABSL_FLAG(std::string, input_dir, "",
          "gsm8k and math: folder with raw train.jsonl/test.jsonl");
ABSL_FLAG(int64_t, train_size, 2000, "built-in tasks: training rows");
ABSL_FLAG(int64_t, val_size, 200, "built-in tasks: test rows");
ABSL_FLAG(uint64_t, seed, 0, "built-in tasks: generator seed");
ABSL_FLAG(int, max_operand, 99, "arithmetic: operands in [0, max_operand]");
ABSL_FLAG(std::string, ops, "+-", "arithmetic: operators to draw from");
ABSL_FLAG(std::string, geo_types, "quadrant+nearest+distance+bearing",
          "geo_map: '+'-separated question types drawn (a type listed twice "
          "is drawn twice as often)");
ABSL_FLAG(int, geo_grid, 6, "geo_map: cells per side (even)");
ABSL_FLAG(int, geo_cell_px, 14, "geo_map: pixels per cell (>= 7)");
ABSL_FLAG(int, geo_landmarks, 3,
          "geo_map: landmarks per map (the VLM quickstart's maps: "
          "--geo_grid=2 --geo_cell_px=42 --geo_landmarks=2)");
ABSL_FLAG(bool, geo_districts, false,
          "geo_map: tinted quadrants, landmarks inset (the VLM quickstart's "
          "maps, docs/vlm.md)");

namespace {

using nlohmann::json;

using RecordConverter = absl::StatusOr<json> (*)(const json&,
                                                 const std::string&, int64_t);

// One raw JSONL file through verl's preprocessor for `split`.
absl::StatusOr<std::vector<json>> ConvertFile(const std::string& path,
                                              const std::string& split,
                                              RecordConverter convert) {
  auto records = verl::core::ReadJsonl(path);
  if (!records.ok()) return records.status();
  std::vector<json> rows;
  for (size_t i = 0; i < records->size(); ++i) {
    auto row = convert((*records)[i], split, i);
    if (!row.ok()) return verl::Annotate(row.status(), path);
    rows.push_back(*std::move(row));
  }
  return rows;
}

// The train and test splits of a generated task: `make` on `options` with
// --train_size rows and --seed, then with --val_size rows, a seed of a
// disjoint stream and split "test".
template <typename Options, typename Make>
void MakeSplits(Options options, Make make, std::vector<json>* train,
                std::vector<json>* test) {
  options.num_rows = absl::GetFlag(FLAGS_train_size);
  options.seed = absl::GetFlag(FLAGS_seed);
  *train = make(options);
  options.num_rows = absl::GetFlag(FLAGS_val_size);
  options.seed += 1000003;  // disjoint stream for the test split
  options.split = "test";
  *test = make(options);
}

absl::Status Run() {
  const std::string task = absl::GetFlag(FLAGS_task);
  const std::string out = absl::GetFlag(FLAGS_output_dir);
  if (out.empty())
    return absl::InvalidArgumentError("--output_dir is required");
  const std::string format = absl::GetFlag(FLAGS_format);
  if (format != "jsonl" && format != "parquet") {
    return absl::InvalidArgumentError(
        absl::StrCat("--format=", format, ": expected jsonl or parquet"));
  }
  std::vector<json> train, test;
  if (task == "arithmetic") {
    verl::rl::ArithmeticTaskOptions o;
    o.max_operand = absl::GetFlag(FLAGS_max_operand);
    o.ops = absl::GetFlag(FLAGS_ops);
    if (o.ops.empty() || o.ops.find_first_not_of("+-*") != std::string::npos) {
      return absl::InvalidArgumentError(
          "--ops must be a non-empty subset of \"+-*\"");
    }
    MakeSplits(o, &verl::rl::MakeArithmeticRows, &train, &test);
  } else if (task == "countdown") {
    MakeSplits(verl::rl::CountdownTaskOptions(), &verl::rl::MakeCountdownRows,
               &train, &test);
  } else if (task == "multiples") {
    MakeSplits(verl::rl::MultiplesTaskOptions(), &verl::rl::MakeMultiplesRows,
               &train, &test);
  } else if (task == "geo_map") {
    verl::rl::GeoMapTaskOptions o;
    o.num_rows = absl::GetFlag(FLAGS_train_size);
    o.seed = absl::GetFlag(FLAGS_seed);
    o.question_types = absl::StrSplit(absl::GetFlag(FLAGS_geo_types),
                                      absl::ByAnyChar("+,"), absl::SkipEmpty());
    o.districts = absl::GetFlag(FLAGS_geo_districts);
    o.grid = absl::GetFlag(FLAGS_geo_grid);
    o.cell_px = absl::GetFlag(FLAGS_geo_cell_px);
    o.num_landmarks = absl::GetFlag(FLAGS_geo_landmarks);
    // JSONL cannot hold bytes: the images go to files the rows name.
    if (format == "jsonl") o.image_dir = out + "/images";
    VERL_ASSIGN_OR_RETURN(train, verl::rl::MakeGeoMapRows(o));
    o.num_rows = absl::GetFlag(FLAGS_val_size);
    o.seed += 1000003;
    o.split = "test";
    VERL_ASSIGN_OR_RETURN(test, verl::rl::MakeGeoMapRows(o));
  } else if (task == "gsm8k" || task == "math") {
    const std::string in = absl::GetFlag(FLAGS_input_dir);
    if (in.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--task=", task, " needs --input_dir"));
    }
    const RecordConverter convert = task == "gsm8k"
                                        ? &verl::rl::ConvertGsm8kRecord
                                        : &verl::rl::ConvertMathRecord;
    VERL_ASSIGN_OR_RETURN(train,
                          ConvertFile(in + "/train.jsonl", "train", convert));
    VERL_ASSIGN_OR_RETURN(test,
                          ConvertFile(in + "/test.jsonl", "test", convert));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--task=", task,
        ": expected arithmetic, countdown, multiples, geo_map, gsm8k or "
        "math"));
  }
  VERL_RETURN_IF_ERROR(verl::core::MakeDirs(out));
  VERL_RETURN_IF_ERROR(
      verl::rl::parquet::WriteDatasetFile(out + "/train." + format, train));
  VERL_RETURN_IF_ERROR(
      verl::rl::parquet::WriteDatasetFile(out + "/test." + format, test));
  std::cout << "prepare_data: wrote " << train.size() << " train and "
            << test.size() << " test rows to " << out << "\n";
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  return verl::core::RunToolMain(
      argc, argv, "prepare_data",
      "Writes verl-format datasets (--format=jsonl or parquet).", Run);
}
