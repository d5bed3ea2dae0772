// File: verl/rl/rewards/reward_score/multiples.cc
#include "verl/rl/rewards/reward_score/multiples.h"

#include "absl/strings/str_cat.h"
#include "verl/rl/rewards/reward_score/text_util.h"

namespace verl::rl::reward {

absl::Status ValidateMultiplesQuestion(const MultiplesQuestion& q) {
  if (q.k < 1 || q.lo < 0 || q.hi < q.lo || q.hi / q.k * q.k < q.lo) {
    return absl::InvalidArgumentError(
        absl::StrCat("multiples question k=", q.k, " lo=", q.lo, " hi=", q.hi,
                     ": expected k >= 1, 0 <= lo <= hi and a multiple of k "
                     "in [lo, hi]"));
  }
  return absl::OkStatus();
}

std::optional<int64_t> ParseMultiplesAnswer(const std::string& response) {
  const std::string s = StripWhitespace(response);
  if (s.empty() || s.size() > 15 || s[0] == '0') return std::nullopt;
  int64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

double MultiplesReward(int64_t y, const MultiplesQuestion& q) {
  if (q.k < 1 || y < q.lo || y > q.hi || y % q.k != 0) return 0.0;
  if (q.hi == q.lo) return 1.0;
  return 0.5 + 0.5 * static_cast<double>(y - q.lo) / (q.hi - q.lo);
}

double MultiplesComputeScore(const std::string& response,
                             const MultiplesQuestion& q) {
  std::optional<int64_t> y = ParseMultiplesAnswer(response);
  return y.has_value() ? MultiplesReward(*y, q) : 0.0;
}

std::vector<std::pair<int64_t, double>> MultiplesTarget(
    const MultiplesQuestion& q) {
  std::vector<std::pair<int64_t, double>> out;
  if (!ValidateMultiplesQuestion(q).ok()) return out;
  double total = 0;
  for (int64_t y = (q.lo + q.k - 1) / q.k * q.k; y <= q.hi; y += q.k) {
    out.emplace_back(y, MultiplesReward(y, q));
    total += out.back().second;
  }
  for (auto& [y, p] : out) p /= total;
  return out;
}

}  // namespace verl::rl::reward
