#include "verl/rl/data/synthetic_tasks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/models/vlm/image.h"
#include "verl/rl/data/geo_map_task.h"

namespace verl::rl {
namespace {

// Evaluates "a op b" with at most one binary operator (for checking rows).
int64_t EvalEquation(const std::string& s);

TEST(SyntheticTasksTest, ArithmeticRowsAreCorrectAndDeterministic) {
  ArithmeticTaskOptions o;
  o.num_rows = 200;
  o.ops = "+-*";
  auto rows = MakeArithmeticRows(o);
  ASSERT_EQ(rows.size(), 200u);
  EXPECT_EQ(rows, MakeArithmeticRows(o));
  o.seed = 1;
  EXPECT_NE(rows, MakeArithmeticRows(o));
  for (const auto& row : rows) {
    const std::string q = row["prompt"][0]["content"];
    const std::string gt = row["reward_model"]["ground_truth"];
    ASSERT_EQ(q.substr(q.size() - 2), "=?");
    EXPECT_EQ(std::to_string(EvalEquation(q.substr(0, q.size() - 2))), gt) << q;
    const std::string answer = row["extra_info"]["answer"];
    EXPECT_EQ(answer.substr(answer.size() - gt.size() - 5), "#### " + gt);
    EXPECT_EQ(row["data_source"], "arithmetic");
    EXPECT_EQ(row["reward_model"]["style"], "rule");
  }
}

TEST(SyntheticTasksTest, CountdownReferenceReachesTarget) {
  CountdownTaskOptions o;
  o.num_rows = 100;
  for (const auto& row : MakeCountdownRows(o)) {
    const auto& gt = row["reward_model"]["ground_truth"];
    ASSERT_EQ(gt["numbers"].size(), 3u);
    // Reference equation is left-to-right with parentheses around products.
    std::string eq = row["extra_info"]["answer"];
    eq = eq.substr(8, eq.size() - 17);  // strip <answer></answer>
    int64_t value = 0;
    char op = '+';
    std::string num;
    for (char c : eq + "+") {
      if (std::isdigit(static_cast<unsigned char>(c))) {
        num += c;
      } else if (c == '+' || c == '-' || c == '*') {
        if (num.empty()) continue;
        int64_t n = std::stoll(num);
        value = op == '+' ? value + n : op == '-' ? value - n : value * n;
        num.clear();
        op = c;
      }
    }
    EXPECT_EQ(value, gt["target"].get<int64_t>()) << eq;
  }
}

TEST(SyntheticTasksTest, MultiplesRowsHaveSeveralValidAnswers) {
  MultiplesTaskOptions o;
  o.num_rows = 500;
  auto rows = MakeMultiplesRows(o);
  ASSERT_EQ(rows.size(), 500u);
  EXPECT_EQ(rows, MakeMultiplesRows(o));
  o.seed = 1;
  EXPECT_NE(rows, MakeMultiplesRows(o));
  std::map<std::string, std::set<int64_t>> answers_seen;
  for (const auto& row : rows) {
    EXPECT_EQ(row["data_source"], "multiples");
    const auto& gt = row["reward_model"]["ground_truth"];
    const int64_t k = gt["k"], lo = gt["lo"], hi = gt["hi"];
    const std::string q = row["prompt"][0]["content"];
    EXPECT_EQ(q, "Name a multiple of " + std::to_string(k) + " between " +
                     std::to_string(lo) + " and " + std::to_string(hi) + ".");
    EXPECT_GE(k, o.min_k);
    EXPECT_LE(k, o.max_k);
    // Valid answers counted independently of the generator's construction.
    int valid = 0;
    for (int64_t y = lo; y <= hi; ++y) valid += y % k == 0;
    EXPECT_GE(valid, o.min_answers) << q;
    EXPECT_LE(valid, o.max_answers) << q;
    EXPECT_EQ(lo % k, 0);
    EXPECT_EQ(hi % k, 0);
    EXPECT_GE(lo, o.min_value);
    EXPECT_LE(hi, o.max_value);
    const int64_t answer =
        std::stoll(row["extra_info"]["answer"].get<std::string>());
    EXPECT_EQ(answer % k, 0) << q;
    EXPECT_GE(answer, lo);
    EXPECT_LE(answer, hi);
    EXPECT_EQ(row["extra_info"]["answer"], std::to_string(answer));
    answers_seen[q].insert(answer);
  }
  // The warm-start answer is drawn uniformly: repeated prompts show several.
  size_t most = 0;
  for (const auto& [q, a] : answers_seen) most = std::max(most, a.size());
  EXPECT_GE(most, 3u);
  // No prompt fits: no rows rather than a loop.
  o.min_value = 90;
  o.max_value = 95;
  EXPECT_TRUE(MakeMultiplesRows(o).empty());
}

// The geo_map answers recomputed from the row's landmarks another way: the
// bearing as the compass direction of largest cosine with the offset.
std::string ExpectedGeoAnswer(const nlohmann::json& row) {
  const nlohmann::json& info = row["extra_info"];
  const int grid = info["grid"];
  std::map<char, std::pair<int, int>> at;  // label -> (col, row)
  for (const auto& l : info["landmarks"]) {
    at[l["label"].get<std::string>()[0]] = {l["col"], l["row"]};
  }
  const std::string q = info["question"];
  std::vector<char> named;  // landmark letters named by the question
  for (size_t i = 0; i + 1 < q.size(); ++i) {
    if (q[i] == ' ' && at.count(q[i + 1]) &&
        (q[i + 2] == ' ' || q[i + 2] == '?')) {
      named.push_back(q[i + 1]);
    }
  }
  const std::string type = info["question_type"];
  if (type == "count") return std::to_string(at.size());
  const auto [ac, ar] = at[named.at(0)];
  if (type == "quadrant") {
    return std::string(ar * 2 < grid ? "N" : "S") + (ac * 2 < grid ? "W" : "E");
  }
  if (type == "nearest") {
    std::map<int, std::string> by_d2;
    for (const auto& [label, cr] : at) {
      if (label == named[0]) continue;
      const int d2 = (cr.first - ac) * (cr.first - ac) +
                     (cr.second - ar) * (cr.second - ar);
      by_d2[d2] += label;
    }
    EXPECT_EQ(by_d2.begin()->second.size(), 1u) << "tie in " << q;
    return by_d2.begin()->second;
  }
  const auto [bc, br] = at[named.at(1)];
  if (type == "distance")
    return std::to_string(std::abs(bc - ac) + std::abs(br - ar));
  const char* names[] = {"N", "NE", "E", "SE", "S", "SW", "W", "NW"};
  const double dirs[8][2] = {{0, 1},  {1, 1},   {1, 0},  {1, -1},
                             {0, -1}, {-1, -1}, {-1, 0}, {-1, 1}};
  const double east = bc - ac, north = ar - br;
  int best = 0;
  double best_cos = -2;
  for (int k = 0; k < 8; ++k) {
    const double c = (east * dirs[k][0] + north * dirs[k][1]) /
                     std::hypot(dirs[k][0], dirs[k][1]);
    if (c > best_cos) best_cos = c, best = k;
  }
  return names[best];
}

TEST(GeoMapTaskTest, AnswersImagesAndDeterminism) {
  GeoMapTaskOptions o;
  o.num_rows = 120;
  auto rows = MakeGeoMapRows(o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 120u);
  EXPECT_EQ(*rows, *MakeGeoMapRows(o));
  std::map<std::string, int> types;
  for (const auto& row : *rows) {
    EXPECT_EQ(row["data_source"], "geo_map");
    const std::string gt = row["reward_model"]["ground_truth"];
    EXPECT_EQ(gt, ExpectedGeoAnswer(row)) << row["extra_info"].dump();
    EXPECT_EQ(row["extra_info"]["answer"], gt);
    ++types[row["extra_info"]["question_type"]];
    const std::string content = row["prompt"][0]["content"];
    EXPECT_EQ(content.rfind("<image>", 0), 0u);
    // The PNG decodes to the map: 6 cells of 14 px, each landmark's cell in
    // its colour around the white letter.
    const auto& bytes = row["images"][0]["bytes"].get_binary();
    auto img = models::vlm::DecodeImage(std::string(bytes.begin(), bytes.end()),
                                        "geo_map row");
    ASSERT_TRUE(img.ok()) << img.status();
    EXPECT_EQ(img->width, 84);
    EXPECT_EQ(img->height, 84);
    for (const auto& l : row["extra_info"]["landmarks"]) {
      const int x = l["col"].get<int>() * 14 + 1,
                y = l["row"].get<int>() * 14 + 1;
      const bool a = l["label"] == "A";
      EXPECT_EQ(img->at(y, x, 0), a ? 200 : img->at(y, x, 0));
      EXPECT_NE(img->at(y, x, 0) + img->at(y, x, 1) + img->at(y, x, 2),
                236 + 226 + 198)
          << "landmark cell shows land";
    }
  }
  EXPECT_EQ(types.size(), 4u);
  for (const auto& [t, count] : types) EXPECT_GE(count, 15) << t;
  // Paths for JSONL: the PNG is written and the row names it.
  o.num_rows = 2;
  o.image_dir = ::testing::TempDir() + "/geo_images";
  auto with_paths = MakeGeoMapRows(o);
  ASSERT_TRUE(with_paths.ok()) << with_paths.status();
  const std::string path = (*with_paths)[1]["images"][0]["path"];
  auto file = core::ReadFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const auto& inline_png = (*rows)[1]["images"][0]["bytes"].get_binary();
  EXPECT_EQ(*file, std::string(inline_png.begin(), inline_png.end()));
  o.grid = 5;
  EXPECT_FALSE(MakeGeoMapRows(o).ok());
}

// The VLM quickstart's options: question_types restricts and weights the
// draw (the default list draws the same rows as before), districts tints
// each quadrant and insets the landmark squares so the tint shows inside
// the landmark's own cell.
TEST(GeoMapTaskTest, QuestionTypesAndDistricts) {
  GeoMapTaskOptions o;
  o.num_rows = 40;
  auto all = MakeGeoMapRows(o);
  ASSERT_TRUE(all.ok()) << all.status();
  o.question_types = {"quadrant", "nearest", "distance", "bearing"};
  EXPECT_EQ(*all, *MakeGeoMapRows(o));
  o.question_types = {"quadrant", "quadrant", "bearing"};
  o.districts = true;
  auto rows = MakeGeoMapRows(o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, *MakeGeoMapRows(o));
  std::map<std::string, int> types;
  // Pixel (1, 1) of a landmark's cell (inside the grid line, outside the
  // inset square): the tint of the landmark's quadrant (NW plain land, NE
  // green, SW blue, SE pink).
  const std::map<std::string, std::vector<int>> tint = {
      {"NW", {236, 226, 198}},
      {"NE", {198, 228, 184}},
      {"SW", {192, 212, 238}},
      {"SE", {236, 196, 214}}};
  for (const auto& row : *rows) {
    const std::string gt = row["reward_model"]["ground_truth"];
    EXPECT_EQ(gt, ExpectedGeoAnswer(row)) << row["extra_info"].dump();
    ++types[row["extra_info"]["question_type"]];
    EXPECT_EQ(row["extra_info"]["districts"], true);
    const auto& bytes = row["images"][0]["bytes"].get_binary();
    auto img = models::vlm::DecodeImage(std::string(bytes.begin(), bytes.end()),
                                        "geo_map row");
    ASSERT_TRUE(img.ok()) << img.status();
    for (const auto& l : row["extra_info"]["landmarks"]) {
      const int col = l["col"], r = l["row"];
      const std::string quadrant =
          std::string(r < 3 ? "N" : "S") + (col < 3 ? "W" : "E");
      const int x = col * 14 + 1, y = r * 14 + 1;
      for (int c = 0; c < 3; ++c) {  // roads run through cell pixels 6-7
        EXPECT_EQ(img->at(y, x, c), tint.at(quadrant)[c]) << quadrant;
      }
      // The landmark's colour at its cell centre (A is red).
      if (l["label"] == "A") {
        EXPECT_EQ(img->at(r * 14 + 7, col * 14 + 4, 0), 200);
      }
    }
  }
  EXPECT_EQ(types.size(), 2u);
  EXPECT_GT(types["quadrant"], types["bearing"]);
  o.question_types = {"quadrant", "heading"};
  auto bad = MakeGeoMapRows(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("heading"), std::string::npos);
  o.question_types.clear();
  EXPECT_FALSE(MakeGeoMapRows(o).ok());
}

// The count question: 1..landmarks landmarks per map, the answer their
// number, each drawn in its colour (A red, B blue, ...) at its cell centre.
TEST(GeoMapTaskTest, CountQuestion) {
  GeoMapTaskOptions o;
  o.num_rows = 40;
  o.num_landmarks = 4;
  o.question_types = {"count", "quadrant"};
  auto rows = MakeGeoMapRows(o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::set<std::string> counts;
  for (const auto& row : *rows) {
    const auto& info = row["extra_info"];
    EXPECT_EQ(row["reward_model"]["ground_truth"], ExpectedGeoAnswer(row));
    if (info["question_type"] != "count") {
      EXPECT_EQ(info["landmarks"].size(), 4u);
      continue;
    }
    counts.insert(row["reward_model"]["ground_truth"].get<std::string>());
    EXPECT_EQ(info["question"],
              "<image>Grid map, north up. How many landmarks are on the map? "
              "Answer with a number.");
    const auto& bytes = row["images"][0]["bytes"].get_binary();
    auto img = models::vlm::DecodeImage(std::string(bytes.begin(), bytes.end()),
                                        "geo_map row");
    ASSERT_TRUE(img.ok()) << img.status();
    const int red[] = {200, 30, 30}, blue[] = {30, 60, 200};
    for (const auto& l : info["landmarks"]) {
      const int* want = l["label"] == "A"   ? red
                        : l["label"] == "B" ? blue
                                            : nullptr;
      if (want == nullptr) continue;
      const int x = l["col"].get<int>() * 14 + 2,
                y = l["row"].get<int>() * 14 + 2;
      for (int c = 0; c < 3; ++c) EXPECT_EQ(img->at(y, x, c), want[c]);
    }
  }
  EXPECT_EQ(counts, (std::set<std::string>{"1", "2", "3", "4"}));
}

// One landmark per map: only the quadrant and count questions (the others
// need two landmarks); the answer is that landmark's quadrant.
TEST(GeoMapTaskTest, OneLandmarkAllowsOnlyTheQuadrantQuestion) {
  GeoMapTaskOptions o;
  o.num_rows = 30;
  o.num_landmarks = 1;
  o.question_types = {"quadrant"};
  auto rows = MakeGeoMapRows(o);
  ASSERT_TRUE(rows.ok()) << rows.status();
  std::set<std::string> answers;
  for (const auto& row : *rows) {
    ASSERT_EQ(row["extra_info"]["landmarks"].size(), 1u);
    EXPECT_EQ(row["reward_model"]["ground_truth"], ExpectedGeoAnswer(row));
    answers.insert(row["reward_model"]["ground_truth"].get<std::string>());
  }
  EXPECT_EQ(answers.size(), 4u);
  o.question_types = {"quadrant", "bearing"};
  auto bad = MakeGeoMapRows(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("num_landmarks=1"), std::string::npos)
      << bad.status();
  o.num_landmarks = 0;
  EXPECT_FALSE(MakeGeoMapRows(o).ok());
}

TEST(GeoMapTaskTest, BearingAndNearestEdgeCases) {
  GeoMap map;
  map.grid = 6;
  map.landmarks = {{'A', 2, 2}, {'B', 2, 0}, {'C', 5, 3}, {'D', 0, 4}};
  EXPECT_EQ(GeoBearing(map, 0, 1), "N");
  EXPECT_EQ(GeoBearing(map, 1, 0), "S");
  EXPECT_EQ(GeoBearing(map, 0, 2), "E");   // 3 east, 1 south: 108.4 deg
  EXPECT_EQ(GeoBearing(map, 0, 3), "SW");  // 2 west, 2 south
  EXPECT_EQ(GeoQuadrant(map, 0), "NW");
  EXPECT_EQ(GeoQuadrant(map, 2), "SE");
  EXPECT_EQ(GeoGridDistance(map, 2, 3), 6);
  EXPECT_EQ(GeoNearest(map, 0), 1);  // B at 2, D at sqrt 8, C at sqrt 10
  map.landmarks[3] = {'D', 2, 4};    // B and D both at 2
  EXPECT_EQ(GeoNearest(map, 0), -1);
}

int64_t EvalEquation(const std::string& s) {
  size_t pos = s.find_first_of("+-*", 1);
  int64_t a = std::stoll(s.substr(0, pos)), b = std::stoll(s.substr(pos + 1));
  switch (s[pos]) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    default:
      return a * b;
  }
}

}  // namespace
}  // namespace verl::rl
