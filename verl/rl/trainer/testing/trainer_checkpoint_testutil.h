// File: verl/rl/trainer/testing/trainer_checkpoint_testutil.h
//
// The tiny PPO config the checkpoint tests train (GAE with a critic, KL in
// the reward with the adaptive controller, cosine LR over 4 steps, no
// validation, save every `save_freq` steps into `ckpt_dir`; FSDP in fp32
// on more than one rank).
#ifndef VERL_RL_TRAINER_TESTING_TRAINER_CHECKPOINT_TESTUTIL_H_
#define VERL_RL_TRAINER_TESTING_TRAINER_CHECKPOINT_TESTUTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/rl/trainer/config/config.pb.h"

namespace verl::rl {

// `extra`: more dotted overrides (e.g. strategy=megatron), applied last.
absl::StatusOr<PpoTrainerConfig> CheckpointTestConfig(
    const std::string& experiment, int64_t steps, int64_t save_freq,
    const std::string& ckpt_dir, int world_size = 1,
    const std::vector<std::string>& extra = {});

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_TESTING_TRAINER_CHECKPOINT_TESTUTIL_H_
