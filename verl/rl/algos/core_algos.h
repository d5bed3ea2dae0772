// File: verl/rl/algos/core_algos.h
//
// Umbrella header of //verl/rl:core_algos, verl's core_algos.py in C++:
// advantage estimators, policy losses, loss aggregation, KL estimators and
// controllers, value/entropy losses, rollout correction, PF-PPO and DAPO.
// Depend on the fine-grained targets directly to pull in less.
#ifndef VERL_RL_ALGOS_CORE_ALGOS_H_
#define VERL_RL_ALGOS_CORE_ALGOS_H_

#include "verl/rl/algos/advantage.h"
#include "verl/rl/algos/agg_loss.h"
#include "verl/rl/algos/dapo.h"
#include "verl/rl/algos/kl.h"
#include "verl/rl/algos/pf_ppo.h"
#include "verl/rl/algos/policy_loss.h"
#include "verl/rl/algos/rollout_correction.h"
#include "verl/rl/algos/torch_functional.h"
#include "verl/rl/algos/value_loss.h"

#endif  // VERL_RL_ALGOS_CORE_ALGOS_H_
