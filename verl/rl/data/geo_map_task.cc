// File: verl/rl/data/geo_map_task.cc
#include "verl/rl/data/geo_map_task.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::rl {
namespace {

using models::vlm::Image;

struct Rgb {
  uint8_t r, g, b;
};

constexpr Rgb kLand{236, 226, 198};
// District tints (GeoMap::districts), NW NE SW SE; NW is the plain land.
constexpr Rgb kDistrict[] = {
    kLand, {198, 228, 184}, {192, 212, 238}, {236, 196, 214}};
constexpr Rgb kGridLine{196, 186, 160};
constexpr Rgb kRoad{110, 110, 110};
constexpr Rgb kInk{20, 20, 20};
constexpr Rgb kWhite{255, 255, 255};
// One colour per label A..H.
constexpr Rgb kLandmarkColors[] = {{200, 30, 30},  {30, 60, 200}, {20, 140, 40},
                                   {150, 40, 170}, {210, 120, 0}, {0, 140, 150},
                                   {120, 70, 20},  {200, 40, 120}};

// 3x5 glyphs, one row per string (A-H and N).
const char* Glyph(char c) {
  switch (c) {
    case 'A':
      return "010101111101101";
    case 'B':
      return "110101110101110";
    case 'C':
      return "011100100100011";
    case 'D':
      return "110101101101110";
    case 'E':
      return "111100110100111";
    case 'F':
      return "111100110100100";
    case 'G':
      return "011100101101011";
    case 'H':
      return "101101111101101";
    default:
      return "101111111111101";  // N
  }
}

void Fill(Image& img, int x0, int y0, int w, int h, Rgb c) {
  for (int y = std::max(0, y0); y < std::min<int>(img.height, y0 + h); ++y) {
    for (int x = std::max(0, x0); x < std::min<int>(img.width, x0 + w); ++x) {
      uint8_t* p = &img.rgb[(y * img.width + x) * 3];
      p[0] = c.r;
      p[1] = c.g;
      p[2] = c.b;
    }
  }
}

// A glyph with `scale`-pixel dots, top-left at (x0, y0).
void DrawGlyph(Image& img, char c, int x0, int y0, int scale, Rgb color) {
  const char* g = Glyph(c);
  for (int r = 0; r < 5; ++r) {
    for (int k = 0; k < 3; ++k) {
      if (g[r * 3 + k] == '1')
        Fill(img, x0 + k * scale, y0 + r * scale, scale, scale, color);
    }
  }
}

const char* const kCompass[] = {"N", "NE", "E", "SE", "S", "SW", "W", "NW"};

double Dist2(const GeoLandmark& a, const GeoLandmark& b) {
  const double dx = a.col - b.col, dy = a.row - b.row;
  return dx * dx + dy * dy;
}

}  // namespace

Image RenderGeoMap(const GeoMap& map, int cell_px) {
  Image img;
  img.width = img.height = static_cast<int64_t>(map.grid) * cell_px;
  img.rgb.resize(img.width * img.height * 3);
  Fill(img, 0, 0, img.width, img.height, kLand);
  if (map.districts) {
    const int half = map.grid / 2 * cell_px;
    for (int q = 1; q < 4; ++q) {
      Fill(img, (q % 2) * half, (q / 2) * half, half, half, kDistrict[q]);
    }
  }
  for (int i = 1; i < map.grid; ++i) {  // cell boundaries
    Fill(img, i * cell_px, 0, 1, img.height, kGridLine);
    Fill(img, 0, i * cell_px, img.width, 1, kGridLine);
  }
  const int band = std::max(2, cell_px / 5);
  for (int r : map.road_rows)
    Fill(img, 0, r * cell_px + (cell_px - band) / 2, img.width, band, kRoad);
  for (int c : map.road_cols)
    Fill(img, c * cell_px + (cell_px - band) / 2, 0, band, img.height, kRoad);
  // North arrow in the top-right cell: a black shaft with an "N" above.
  {
    const int x = (map.grid - 1) * cell_px, scale = std::max(1, cell_px / 14);
    DrawGlyph(img, 'N', x + cell_px / 2 - scale, 1, std::max(1, scale), kInk);
    Fill(img, x + cell_px / 2, 6 * scale + 1, std::max(1, scale),
         cell_px - 6 * scale - 2, kInk);
  }
  // The square leaves the cell's grid line (and, with districts, a band of
  // the district's tint) around it.
  const int inset = map.districts ? std::max(2, cell_px / 5) : 1;
  const int side = cell_px - 2 * inset + 1;
  const int scale = std::max(1, (side - 1) / 6);
  for (const GeoLandmark& l : map.landmarks) {
    const Rgb color = kLandmarkColors[(l.label - 'A') % 8];
    Fill(img, l.col * cell_px + inset, l.row * cell_px + inset, side, side,
         color);
    const int gx = l.col * cell_px + (cell_px - 3 * scale + 1) / 2;
    const int gy = l.row * cell_px + (cell_px - 5 * scale + 1) / 2;
    DrawGlyph(img, l.label, gx, gy, scale, kWhite);
  }
  return img;
}

std::string GeoQuadrant(const GeoMap& map, int a) {
  const GeoLandmark& l = map.landmarks[a];
  return absl::StrCat(l.row < map.grid / 2 ? "N" : "S",
                      l.col < map.grid / 2 ? "W" : "E");
}

int GeoGridDistance(const GeoMap& map, int a, int b) {
  const GeoLandmark &p = map.landmarks[a], &q = map.landmarks[b];
  return std::abs(p.col - q.col) + std::abs(p.row - q.row);
}

std::string GeoBearing(const GeoMap& map, int a, int b) {
  const GeoLandmark &p = map.landmarks[a], &q = map.landmarks[b];
  const double east = q.col - p.col, north = p.row - q.row;
  double deg = std::atan2(east, north) * 180.0 / M_PI;  // clockwise from N
  if (deg < 0) deg += 360.0;
  // Sector boundaries at 22.5 + 45k degrees: tan(22.5) is irrational, so no
  // integer offset lies on one.
  return kCompass[static_cast<int>(std::floor((deg + 22.5) / 45.0)) % 8];
}

int GeoNearest(const GeoMap& map, int a) {
  int best = -1;
  double best_d = 0;
  bool tie = false;
  for (int i = 0; i < static_cast<int>(map.landmarks.size()); ++i) {
    if (i == a) continue;
    const double d = Dist2(map.landmarks[a], map.landmarks[i]);
    if (best < 0 || d < best_d) {
      best = i;
      best_d = d;
      tie = false;
    } else if (d == best_d) {
      tie = true;
    }
  }
  return tie ? -1 : best;
}

absl::StatusOr<std::vector<nlohmann::json>> MakeGeoMapRows(
    const GeoMapTaskOptions& o) {
  if (o.grid < 2 || o.grid % 2 != 0 || o.cell_px < 7 || o.num_landmarks < 1 ||
      o.num_landmarks > 8 || o.num_landmarks > o.grid * o.grid - 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "geo_map: grid=", o.grid, " (even, >= 2), cell_px=", o.cell_px,
        " (>= 7), num_landmarks=", o.num_landmarks, " (1..8)"));
  }
  static const char* const kTypes[] = {"quadrant", "nearest", "distance",
                                       "bearing", "count"};
  std::vector<int> kinds;  // indices into kTypes
  for (const std::string& t : o.question_types) {
    const auto* it = std::find(std::begin(kTypes), std::end(kTypes), t);
    if (it == std::end(kTypes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("geo_map: unknown question type '", t,
                       "' (quadrant, nearest, distance, bearing, count)"));
    }
    kinds.push_back(static_cast<int>(it - std::begin(kTypes)));
  }
  if (kinds.empty()) {
    return absl::InvalidArgumentError("geo_map: no question types");
  }
  if (o.num_landmarks == 1 &&
      std::any_of(kinds.begin(), kinds.end(),
                  [](int k) { return k != 0 && k != 4; })) {
    return absl::InvalidArgumentError(
        "geo_map: num_landmarks=1 allows only the quadrant and count "
        "questions (nearest, distance and bearing need two landmarks)");
  }
  if (!o.image_dir.empty()) VERL_RETURN_IF_ERROR(core::MakeDirs(o.image_dir));
  std::mt19937_64 rng(o.seed);
  auto uniform = [&](int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(rng);
  };
  std::vector<nlohmann::json> rows;
  rows.reserve(o.num_rows);
  for (int64_t i = 0; i < o.num_rows; ++i) {
    GeoMap map;
    map.grid = o.grid;
    map.districts = o.districts;
    const int kind = kinds[uniform(0, static_cast<int>(kinds.size()) - 1)];
    std::string question, answer, type;
    while (true) {
      map.landmarks.clear();
      map.road_rows = {uniform(0, o.grid - 1)};
      map.road_cols.clear();
      if (uniform(0, 1) == 1) map.road_cols.push_back(uniform(0, o.grid - 1));
      std::vector<int> cells;  // every cell but the compass's
      for (int c = 0; c < o.grid * o.grid; ++c) {
        if (c != o.grid - 1) cells.push_back(c);
      }
      std::shuffle(cells.begin(), cells.end(), rng);
      // The count question draws how many landmarks the map has (1..n);
      // the others always place n.
      const int marks =
          kind == 4 ? uniform(1, o.num_landmarks) : o.num_landmarks;
      for (int k = 0; k < marks; ++k) {
        map.landmarks.push_back(
            {static_cast<char>('A' + k), cells[k] % o.grid, cells[k] / o.grid});
      }
      const int a = uniform(0, marks - 1);
      int b = marks > 1 ? uniform(0, marks - 2) : a;
      if (marks > 1 && b >= a) ++b;
      const std::string A(1, map.landmarks[a].label),
          B(1, map.landmarks[b].label);
      if (kind == 0) {
        type = "quadrant";
        question = absl::StrCat("Which quadrant is landmark ", A,
                                " in? Answer NE, NW, SE or SW.");
        answer = GeoQuadrant(map, a);
      } else if (kind == 1) {
        const int nearest = GeoNearest(map, a);
        if (nearest < 0) continue;  // a tie: draw another map
        type = "nearest";
        question = absl::StrCat("Which landmark is nearest to ", A,
                                "? Answer with its letter.");
        answer = std::string(1, map.landmarks[nearest].label);
      } else if (kind == 2) {
        type = "distance";
        question = absl::StrCat("How many grid steps (Manhattan) from ", A,
                                " to ", B, "? Answer with a number.");
        answer = absl::StrCat(GeoGridDistance(map, a, b));
      } else if (kind == 4) {
        type = "count";
        question = "How many landmarks are on the map? Answer with a number.";
        answer = absl::StrCat(marks);
      } else {
        type = "bearing";
        question = absl::StrCat("Bearing from ", A, " to ", B,
                                "? Answer N, NE, E, SE, S, SW, W or NW.");
        answer = GeoBearing(map, a, b);
      }
      break;
    }
    const models::vlm::Image img = RenderGeoMap(map, o.cell_px);
    VERL_ASSIGN_OR_RETURN(std::string png, models::vlm::EncodePng(img));
    nlohmann::json image;
    if (o.image_dir.empty()) {
      image = {{"bytes", nlohmann::json::binary(
                             std::vector<uint8_t>(png.begin(), png.end()))}};
    } else {
      const std::string path =
          absl::StrCat(o.image_dir, "/", o.split, "_", i, ".png");
      VERL_RETURN_IF_ERROR(core::WriteFileAtomic(path, png));
      image = {{"path", path}};
    }
    nlohmann::json landmarks = nlohmann::json::array();
    for (const GeoLandmark& l : map.landmarks) {
      landmarks.push_back(
          {{"label", std::string(1, l.label)}, {"col", l.col}, {"row", l.row}});
    }
    const std::string content =
        absl::StrCat("<image>Grid map, north up. ", question);
    rows.push_back({
        {"data_source", "geo_map"},
        {"prompt",
         nlohmann::json::array({{{"role", "user"}, {"content", content}}})},
        {"images", nlohmann::json::array({image})},
        {"ability", "spatial"},
        {"reward_model", {{"style", "rule"}, {"ground_truth", answer}}},
        {"extra_info",
         {{"split", o.split},
          {"index", i},
          {"question", content},
          {"answer", answer},
          {"question_type", type},
          {"grid", o.grid},
          {"landmarks", landmarks}}},
    });
    if (o.districts) rows.back()["extra_info"]["districts"] = true;
  }
  return rows;
}

}  // namespace verl::rl
