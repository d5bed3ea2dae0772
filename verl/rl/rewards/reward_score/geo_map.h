// File: verl/rl/rewards/reward_score/geo_map.h
//
// "geo_map" scorer (the built-in geospatial task, MakeGeoMapRows): every
// question has one exact answer (a quadrant NE/NW/SE/SW, a landmark letter,
// a grid distance, or an 8-point bearing N/NE/.../NW). The answer is the
// response whitespace-stripped, or the text after its last "####" when it
// has one; it scores 1.0 when it equals the ground truth ignoring case,
// else 0.0.
#ifndef VERL_RL_REWARDS_REWARD_SCORE_GEO_MAP_H_
#define VERL_RL_REWARDS_REWARD_SCORE_GEO_MAP_H_

#include <string>

namespace verl::rl::reward {

// The answer a response gives (see above).
std::string GeoMapExtractAnswer(const std::string& response);
double GeoMapComputeScore(const std::string& response,
                          const std::string& ground_truth);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_GEO_MAP_H_
