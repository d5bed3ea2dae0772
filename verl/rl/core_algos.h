// File: verl/rl/core_algos.h
//
// Umbrella header of //verl/rl:core_algos, verl's core_algos.py in C++:
// advantage estimators, policy losses, loss aggregation, KL estimators and
// controllers, value/entropy losses, rollout correction, PF-PPO and DAPO.
// Depend on the fine-grained targets directly to pull in less.
#ifndef VERL_RL_CORE_ALGOS_H_
#define VERL_RL_CORE_ALGOS_H_

#include "verl/rl/advantage.h"
#include "verl/rl/agg_loss.h"
#include "verl/rl/dapo.h"
#include "verl/rl/kl.h"
#include "verl/rl/pf_ppo.h"
#include "verl/rl/policy_loss.h"
#include "verl/rl/rollout_correction.h"
#include "verl/rl/torch_functional.h"
#include "verl/rl/value_loss.h"

#endif  // VERL_RL_CORE_ALGOS_H_
