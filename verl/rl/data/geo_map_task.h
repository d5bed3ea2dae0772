// File: verl/rl/data/geo_map_task.h
//
// The built-in geospatial task for vision-language RL (issue #18, verl's
// geospatial walkthrough in miniature, no downloads): a seeded grid map
// drawn by hand into a PNG — beige land, grid lines, one or two roads,
// labelled landmarks (letters on coloured squares, one colour per letter)
// and a north arrow in the top-right corner — with a question whose answer
// is computed exactly:
//   quadrant  "Which quadrant is landmark A in?"        NE | NW | SE | SW
//   nearest   "Which landmark is nearest to A?"         a letter (unique)
//   distance  "Grid distance (Manhattan) from A to B?"  an integer
//   bearing   "Bearing from A to B?"  N | NE | E | SE | S | SW | W | NW
//             (8-point compass, north up; ties cannot occur on a grid)
//   count     "How many landmarks are on the map?"     1..landmarks (the
//             map then holds a drawn number of them; not in the default
//             list)
// Rows are in verl's multimodal format: the prompt's user message starts
// with an <image> placeholder, `images` holds the PNG (bytes, or a path
// when written to image_dir), reward_model.ground_truth is the answer
// (scored by the "geo_map" rule scorer), extra_info carries question,
// answer (for the SFT warm start), the question type and the landmarks.
#ifndef VERL_RL_DATA_GEO_MAP_TASK_H_
#define VERL_RL_DATA_GEO_MAP_TASK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/models/vlm/image.h"

namespace verl::rl {

struct GeoLandmark {
  char label = 'A';
  int col = 0, row = 0;  // cell; row 0 is the northern edge
};

struct GeoMap {
  int grid = 6;  // cells per side (even: the quadrants split the grid)
  std::vector<GeoLandmark> landmarks;
  std::vector<int> road_rows, road_cols;  // east-west / north-south roads
  // Four districts: each quadrant's land in its own tint, and landmark
  // squares inset so the tint shows around them inside their cell. A tiny
  // vision-language model then reads a landmark's quadrant from its own
  // patch; without it the quadrant is an absolute position, which the
  // RoPE-only towers of tiny-qwen2.5-vl do not learn in a quickstart's
  // few hundred steps (docs/vlm.md).
  bool districts = false;
};

// The map as an RGB image of grid * cell_px pixels per side (cell_px >= 7).
models::vlm::Image RenderGeoMap(const GeoMap& map, int cell_px);

// The exact answers (indices into map.landmarks).
std::string GeoQuadrant(const GeoMap& map, int a);
int GeoGridDistance(const GeoMap& map, int a, int b);
std::string GeoBearing(const GeoMap& map, int a, int b);
// The landmark nearest to `a` (Euclidean, cell centres); -1 on a tie.
int GeoNearest(const GeoMap& map, int a);

struct GeoMapTaskOptions {
  int64_t num_rows = 1000;
  uint64_t seed = 0;
  int grid = 6;
  // 14: one cell per vision patch, an 84x84 image = 9 image tokens.
  int cell_px = 14;
  // 1..8, labelled A, B, ...; 1 allows only the quadrant question.
  int num_landmarks = 3;
  // The question types drawn, uniformly per row, from this list (a type
  // listed twice is drawn twice as often); the default draws the four
  // positional ones ("count" is the fifth).
  std::vector<std::string> question_types = {"quadrant", "nearest", "distance",
                                             "bearing"};
  bool districts = false;  // GeoMap::districts
  std::string split = "train";
  // Empty: images inline as {"bytes": PNG} (Parquet). Else each PNG is
  // written there and the row holds {"path": ...} (JSONL).
  std::string image_dir;
};

absl::StatusOr<std::vector<nlohmann::json>> MakeGeoMapRows(
    const GeoMapTaskOptions& options);

}  // namespace verl::rl

#endif  // VERL_RL_DATA_GEO_MAP_TASK_H_
