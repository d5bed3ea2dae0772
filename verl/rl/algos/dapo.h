// File: verl/rl/algos/dapo.h
//
// DAPO pieces that are not a loss: the overlong-buffer reward penalty (reward
// manager "dapo") and dynamic sampling's group filter
// (algorithm.filter_groups): keep prompt groups whose metric has population
// std > 0, or that hold a single sample.
#ifndef VERL_RL_ALGOS_DAPO_H_
#define VERL_RL_ALGOS_DAPO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace verl::rl {

// expected = max_resp_len − buffer_len; exceed = valid_len − expected;
// penalty = min(−exceed/buffer_len·penalty_factor, 0). Error (naming the key)
// if max_resp_len < buffer_len or buffer_len <= 0.
absl::StatusOr<double> OverlongBufferPenalty(int64_t valid_response_length,
                                             int64_t max_resp_len,
                                             int64_t buffer_len,
                                             double penalty_factor);

struct GroupFilterResult {
  std::vector<int64_t> kept_rows;      // row indices, in input order
  std::vector<std::string> kept_uids;  // kept groups, first-appearance order
  int64_t num_groups = 0;              // groups seen
};

// Groups rows by uid; keeps a group iff np.std(metric) > 0 or it has one row.
GroupFilterResult FilterGroupsByStd(const std::vector<std::string>& uids,
                                    const std::vector<double>& metric);

// Dynamic sampling's stopping rule (recipe dapo_ray_trainer): after
// `num_gen_batches` generation rounds that kept `num_prompts_kept` prompt
// groups in total, returns true if another round is needed (fewer than
// train_batch_size prompts kept), false if the batch is full (then truncate
// to train_batch_size·n trajectories), and an error naming
// algorithm.filter_groups.max_num_gen_batches when the round budget (> 0) is
// used up without filling the batch.
absl::StatusOr<bool> DynamicSamplingNeedsMoreRounds(
    int64_t num_prompts_kept, int64_t train_batch_size, int64_t num_gen_batches,
    int64_t max_num_gen_batches);

}  // namespace verl::rl

#endif  // VERL_RL_ALGOS_DAPO_H_
