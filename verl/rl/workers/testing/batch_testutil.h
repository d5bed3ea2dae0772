// File: verl/rl/workers/testing/batch_testutil.h
//
// Test helper: random RL batches in verl's layout (left-padded prompts,
// right-padded responses) for the role and trainer tests.
#ifndef VERL_RL_WORKERS_TESTING_BATCH_TESTUTIL_H_
#define VERL_RL_WORKERS_TESTING_BATCH_TESTUTIL_H_

#include <cstdint>
#include <vector>

#include "verl/core/batch.h"

namespace verl::rl::testing {

// Rows with the given real prompt/response lengths (padded to P and R), random
// token ids in [1, vocab), plus response_mask, uid ("g<i/group>") columns.
core::Batch MakeRolloutBatch(int64_t vocab, int64_t P, int64_t R,
                             const std::vector<int64_t>& prompt_lens,
                             const std::vector<int64_t>& response_lens,
                             uint64_t seed, int64_t group_size = 1);

}  // namespace verl::rl::testing

#endif  // VERL_RL_WORKERS_TESTING_BATCH_TESTUTIL_H_
