// File: verl/rl/algos/dapo.cc
#include "verl/rl/algos/dapo.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace verl::rl {

absl::StatusOr<double> OverlongBufferPenalty(int64_t valid_response_length,
                                             int64_t max_resp_len,
                                             int64_t buffer_len,
                                             double penalty_factor) {
  if (buffer_len <= 0 || max_resp_len < buffer_len) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reward_kwargs.overlong_buffer_cfg: need 0 < len <= max_resp_len, got "
        "len=",
        buffer_len, " max_resp_len=", max_resp_len));
  }
  const double expected = static_cast<double>(max_resp_len - buffer_len);
  const double exceed = static_cast<double>(valid_response_length) - expected;
  return std::min(-exceed / static_cast<double>(buffer_len) * penalty_factor,
                  0.0);
}

GroupFilterResult FilterGroupsByStd(const std::vector<std::string>& uids,
                                    const std::vector<double>& metric) {
  CHECK_EQ(uids.size(), metric.size());
  std::vector<std::string> order;
  std::unordered_map<std::string, std::vector<double>> values;
  for (size_t i = 0; i < uids.size(); ++i) {
    auto [it, inserted] = values.try_emplace(uids[i]);
    if (inserted) order.push_back(uids[i]);
    it->second.push_back(metric[i]);
  }
  std::unordered_map<std::string, bool> keep;
  GroupFilterResult result;
  result.num_groups = static_cast<int64_t>(order.size());
  for (const std::string& uid : order) {
    const std::vector<double>& v = values[uid];
    double mean = 0.0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    double var = 0.0;
    for (double x : v) var += (x - mean) * (x - mean);
    const bool k = v.size() == 1 || std::sqrt(var / v.size()) > 0.0;
    keep[uid] = k;
    if (k) result.kept_uids.push_back(uid);
  }
  for (size_t i = 0; i < uids.size(); ++i)
    if (keep[uids[i]]) result.kept_rows.push_back(static_cast<int64_t>(i));
  return result;
}

absl::StatusOr<bool> DynamicSamplingNeedsMoreRounds(
    int64_t num_prompts_kept, int64_t train_batch_size, int64_t num_gen_batches,
    int64_t max_num_gen_batches) {
  if (num_prompts_kept >= train_batch_size) return false;
  if (max_num_gen_batches <= 0 || num_gen_batches < max_num_gen_batches) {
    return true;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "dynamic sampling kept ", num_prompts_kept, " of ", train_batch_size,
      " prompts after num_gen_batches=", num_gen_batches,
      " >= algorithm.filter_groups.max_num_gen_batches=", max_num_gen_batches,
      "; the data may be too easy or too hard (every group has zero "
      "variance)"));
}

}  // namespace verl::rl
