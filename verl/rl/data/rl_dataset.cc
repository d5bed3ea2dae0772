#include "verl/rl/data/rl_dataset.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "verl/core/status.h"
#include "verl/rl/data/geo_map_task.h"
#include "verl/rl/data/parquet/dataset_file.h"
#include "verl/rl/data/synthetic_tasks.h"

namespace verl::rl {
namespace {

// One entry of a row's images column: bytes (Parquet binary, e.g. what
// HF datasets' Image feature stores as {"bytes": ..., "path": ...}) or a
// file path.
bool IsImageEntry(const nlohmann::json& v) {
  if (v.is_binary() ||
      (v.is_string() && !v.get_ref<const std::string&>().empty()))
    return true;
  if (!v.is_object()) return false;
  auto bytes = v.find("bytes");
  if (bytes != v.end() && bytes->is_binary()) return true;
  auto path = v.find("path");
  return path != v.end() && path->is_string() &&
         !path->get_ref<const std::string&>().empty();
}

// A row's prompt must be a non-empty list of {"role","content"} messages
// (content a string, or a list of content items as in multimodal rows); its
// images column, when present and not null, a list of image entries.
absl::Status ValidateRow(const nlohmann::json& row,
                         const std::string& prompt_key,
                         const std::string& image_key) {
  if (!row.is_object())
    return absl::InvalidArgumentError("row is not a JSON object");
  if (!row.contains(prompt_key) || !row[prompt_key].is_array() ||
      row[prompt_key].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", prompt_key, "\" must be a non-empty list of chat messages"));
  }
  for (const auto& m : row[prompt_key]) {
    if (!m.is_object() || !m.contains("role") || !m.contains("content") ||
        !m["role"].is_string() ||
        !(m["content"].is_string() || m["content"].is_array())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", prompt_key,
          "\" messages need string \"role\" and \"content\" (a string or a "
          "list of content items)"));
    }
  }
  if (!image_key.empty() && row.contains(image_key) &&
      !row[image_key].is_null()) {
    const nlohmann::json& images = row[image_key];
    if (!images.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", image_key, "\" must be a list of images"));
    }
    for (size_t k = 0; k < images.size(); ++k) {
      if (!IsImageEntry(images[k])) {
        return absl::InvalidArgumentError(
            absl::StrCat("\"", image_key, "\"[", k,
                         "] must be image bytes, a path, or {\"bytes\": ...} / "
                         "{\"path\": ...}"));
      }
    }
  }
  if (!row.contains("data_source") || !row["data_source"].is_string()) {
    return absl::InvalidArgumentError("missing string \"data_source\"");
  }
  return absl::OkStatus();
}

std::vector<int64_t> Permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// "builtin:<task>/<split>[?key=value&...]" names a generated dataset (no
// file needed). Options: rows, seed, max_operand, ops and calculator=1
// (arithmetic; the tool quickstart), num_numbers and max_number
// (countdown), min_k, max_k, min_answers and max_answers (multiples), grid,
// cell_px, landmarks, districts=1 and types (geo_map: map images inline as
// PNG bytes, for vision-language models; types is a '+'-separated list of
// question types, e.g. types=quadrant+bearing).
absl::StatusOr<std::vector<nlohmann::json>> ReadRows(const std::string& file) {
  constexpr absl::string_view kBuiltin = "builtin:";
  if (file.rfind(std::string(kBuiltin), 0) != 0) {
    return parquet::ReadDatasetFile(file);  // .parquet or JSON Lines
  }
  std::string spec = file.substr(kBuiltin.size());
  std::map<std::string, std::string> opts;
  if (const size_t q = spec.find('?'); q != std::string::npos) {
    for (absl::string_view kv :
         absl::StrSplit(spec.substr(q + 1), '&', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p =
          absl::StrSplit(kv, absl::MaxSplits('=', 1));
      opts[p.first] = p.second;
    }
    spec = spec.substr(0, q);
  }
  const size_t slash = spec.find('/');
  const std::string task = spec.substr(0, slash);
  const std::string split =
      slash == std::string::npos ? "train" : spec.substr(slash + 1);
  if (split != "train" && split != "test") {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": split must be train or test, e.g. builtin:arithmetic/train"));
  }
  const bool train = split == "train";
  auto int_opt = [&](const std::string& key,
                     int64_t fallback) -> absl::StatusOr<int64_t> {
    auto it = opts.find(key);
    if (it == opts.end()) return fallback;
    int64_t v;
    if (!absl::SimpleAtoi(it->second, &v) || v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": option ", key, "=", it->second,
                       " is not a non-negative integer"));
    }
    opts.erase(it);
    return v;
  };
  VERL_ASSIGN_OR_RETURN(
      int64_t rows,
      int_opt("rows", train ? kBuiltinTrainRows : kBuiltinTestRows));
  VERL_ASSIGN_OR_RETURN(int64_t seed, int_opt("seed", 0));
  seed = train ? seed : seed + 1000003;  // disjoint stream for the test split
  std::vector<nlohmann::json> out;
  if (task == "arithmetic") {
    ArithmeticTaskOptions o;
    o.num_rows = rows;
    o.seed = seed;
    o.split = split;
    VERL_ASSIGN_OR_RETURN(int64_t max_operand,
                          int_opt("max_operand", o.max_operand));
    o.max_operand = static_cast<int>(max_operand);
    VERL_ASSIGN_OR_RETURN(int64_t calculator, int_opt("calculator", 0));
    o.calculator = calculator != 0;
    if (auto it = opts.find("ops"); it != opts.end()) {
      o.ops = it->second;
      opts.erase(it);
      if (o.ops.empty() ||
          o.ops.find_first_not_of("+-*") != std::string::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ": ops must be a subset of +-*"));
      }
    }
    out = MakeArithmeticRows(o);
  } else if (task == "countdown") {
    CountdownTaskOptions o;
    o.num_rows = rows;
    o.seed = seed;
    o.split = split;
    VERL_ASSIGN_OR_RETURN(int64_t numbers,
                          int_opt("num_numbers", o.num_numbers));
    VERL_ASSIGN_OR_RETURN(int64_t max_number,
                          int_opt("max_number", o.max_number));
    o.num_numbers = static_cast<int>(std::max<int64_t>(numbers, 1));
    o.max_number = static_cast<int>(std::max<int64_t>(max_number, 1));
    out = MakeCountdownRows(o);
  } else if (task == "multiples") {
    MultiplesTaskOptions o;
    o.num_rows = rows;
    o.seed = seed;
    o.split = split;
    for (auto [key, field] : {std::pair<const char*, int*>{"min_k", &o.min_k},
                              {"max_k", &o.max_k},
                              {"min_answers", &o.min_answers},
                              {"max_answers", &o.max_answers}}) {
      VERL_ASSIGN_OR_RETURN(int64_t v, int_opt(key, *field));
      *field = static_cast<int>(std::min<int64_t>(v, 1000));
    }
    out = MakeMultiplesRows(o);
    if (out.empty() && rows > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": no multiples question fits these options"));
    }
  } else if (task == "geo_map") {
    GeoMapTaskOptions o;
    o.num_rows = rows;
    o.seed = seed;
    o.split = split;
    for (auto [key, field] : {std::pair<const char*, int*>{"grid", &o.grid},
                              {"cell_px", &o.cell_px},
                              {"landmarks", &o.num_landmarks}}) {
      VERL_ASSIGN_OR_RETURN(int64_t v, int_opt(key, *field));
      *field = static_cast<int>(std::min<int64_t>(v, 1000));
    }
    VERL_ASSIGN_OR_RETURN(int64_t districts, int_opt("districts", 0));
    o.districts = districts != 0;
    if (auto it = opts.find("types"); it != opts.end()) {
      // '+'-separated (a ',' would split a data.*_files list), e.g.
      // types=quadrant+quadrant+bearing.
      o.question_types =
          absl::StrSplit(it->second, absl::ByAnyChar("+,"), absl::SkipEmpty());
      opts.erase(it);
    }
    absl::StatusOr<std::vector<nlohmann::json>> geo = MakeGeoMapRows(o);
    if (!geo.ok()) return Annotate(geo.status(), file);
    out = *std::move(geo);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": unknown built-in task \"", task,
                     "\" (arithmetic, countdown, multiples, geo_map)"));
  }
  if (!opts.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": unknown option \"", opts.begin()->first, "\""));
  }
  return out;
}

}  // namespace

absl::StatusOr<RLDataset> RLDataset::Load(const RLDatasetOptions& options) {
  if (options.files.empty())
    return absl::InvalidArgumentError("no data files given");
  std::vector<nlohmann::json> rows;
  for (const auto& file : options.files) {
    auto part = ReadRows(file);
    if (!part.ok()) return part.status();
    for (size_t i = 0; i < part->size(); ++i) {
      absl::Status s =
          ValidateRow((*part)[i], options.prompt_key, options.image_key);
      if (!s.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(file, ":", i + 1, ": ", s.message()));
      }
    }
    std::move(part->begin(), part->end(), std::back_inserter(rows));
  }
  if (options.max_samples >= 0 &&
      options.max_samples < static_cast<int64_t>(rows.size())) {
    std::vector<nlohmann::json> subset;
    if (options.shuffle) {
      for (int64_t i : Permutation(rows.size(), options.seed)) {
        if (static_cast<int64_t>(subset.size()) == options.max_samples) break;
        subset.push_back(rows[i]);
      }
    } else {
      subset.assign(rows.begin(), rows.begin() + options.max_samples);
    }
    rows = std::move(subset);
  }
  if (options.filter_overlong_prompts) {
    if (!options.prompt_length) {
      return absl::InvalidArgumentError(
          "filter_overlong_prompts needs a prompt-length function");
    }
    std::vector<nlohmann::json> kept;
    for (auto& row : rows) {
      if (options.prompt_length(row) <= options.max_prompt_length)
        kept.push_back(std::move(row));
    }
    rows = std::move(kept);
  }
  if (rows.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset ", options.files[0], " is empty after filtering"));
  }
  return RLDataset(std::move(rows));
}

nlohmann::json DataLoaderState::ToJson() const {
  return {{"epoch", epoch}, {"batches_in_epoch", batches_in_epoch}};
}

absl::StatusOr<DataLoaderState> DataLoaderState::FromJson(
    const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("epoch") ||
      !j.contains("batches_in_epoch") || !j["epoch"].is_number_integer() ||
      !j["batches_in_epoch"].is_number_integer()) {
    return absl::InvalidArgumentError(
        "dataloader state needs integer \"epoch\" and \"batches_in_epoch\"");
  }
  DataLoaderState s;
  s.epoch = j["epoch"];
  s.batches_in_epoch = j["batches_in_epoch"];
  if (s.epoch < 0 || s.batches_in_epoch < 0) {
    return absl::InvalidArgumentError("dataloader state has negative position");
  }
  return s;
}

DataLoader::DataLoader(const RLDataset* dataset, int64_t batch_size,
                       bool shuffle, uint64_t seed, bool drop_last)
    : dataset_(dataset),
      batch_size_(batch_size > 0 ? batch_size : dataset->size()),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {}

int64_t DataLoader::num_batches() const {
  const int64_t n = dataset_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

const std::vector<int64_t>& DataLoader::EpochOrder(int64_t epoch) {
  if (cached_epoch_ != epoch) {
    if (shuffle_) {
      // A fresh permutation per epoch, a pure function of (seed, epoch) so a
      // restored loader continues exactly.
      cached_order_ =
          Permutation(dataset_->size(), seed_ * 0x9E3779B97F4A7C15ULL + epoch);
    } else {
      cached_order_.resize(dataset_->size());
      std::iota(cached_order_.begin(), cached_order_.end(), 0);
    }
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

std::optional<std::vector<nlohmann::json>> DataLoader::Next() {
  if (state_.batches_in_epoch >= num_batches()) {
    ++state_.epoch;
    state_.batches_in_epoch = 0;
    return std::nullopt;
  }
  const std::vector<int64_t>& order = EpochOrder(state_.epoch);
  const int64_t begin = state_.batches_in_epoch * batch_size_;
  const int64_t end = std::min<int64_t>(begin + batch_size_, order.size());
  std::vector<nlohmann::json> batch;
  for (int64_t i = begin; i < end; ++i)
    batch.push_back(dataset_->row(order[i]));
  ++state_.batches_in_epoch;
  return batch;
}

}  // namespace verl::rl
