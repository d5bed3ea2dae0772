// File: verl/rl/rewards/reward_score/geo_map.cc
#include "verl/rl/rewards/reward_score/geo_map.h"

#include "absl/strings/ascii.h"
#include "verl/rl/rewards/reward_score/text_util.h"

namespace verl::rl::reward {

std::string GeoMapExtractAnswer(const std::string& response) {
  const size_t marker = response.rfind("####");
  return StripWhitespace(
      marker == std::string::npos ? response : response.substr(marker + 4));
}

double GeoMapComputeScore(const std::string& response,
                          const std::string& ground_truth) {
  const std::string answer = GeoMapExtractAnswer(response);
  const std::string want = StripWhitespace(ground_truth);
  return !want.empty() &&
                 absl::AsciiStrToUpper(answer) == absl::AsciiStrToUpper(want)
             ? 1.0
             : 0.0;
}

}  // namespace verl::rl::reward
