// File: verl/rl/trainer/trainer_profiling.h
//
// The PPO trainer's profiling, driven by `global_profiler.*` and each role's
// resolved `profiler` block (actor_rollout_ref.actor / .rollout / .ref,
// critic, reward_model): a role profiles step N when N is in
// global_profiler.steps, its `enable` is set and this rank is chosen
// (all_ranks, ranks, else rank 0), with its own tool. The actor's block is
// verl's "e2e" profiler: it covers the whole step. Every role lives in this
// process, so another role's profiling covers that role's phases only
// (rollout: gen, gen_max; ref: ref; critic: values, update_critic;
// reward_model: reward; actor alone: old_log_prob, update_actor,
// update_weights when the actor's phases must be told apart): its trace
// records only spans inside those phases, and its memory snapshot keeps only
// their trace events (live blocks and counters stay whole).
//
//  - TrainerPhase: one RL phase ("gen", "update_actor", ...) as a timing_raw
//    entry (-> timing_s/<name>), a timeline span and a memory phase at once
//    (verl's marked_timer).
//  - TrainerProfiler: StartStep(N) / StopStep(N) bracket a profiled step
//    (N in global_profiler.steps, actor profiler enabled, this rank chosen):
//      tool torch_memory {save_path}/step{N}/torch_memory_rank{R}_pid{P}.pickle
//                         (+ .json summary, .svg timeline); recording starts
//                         at construction, and AfterStep(N) writes
//                         step{N}/post_update_step{N}_rank{R}_pid{P}.pickle
//                         after every step on every rank, as verl does
//      tool torch or timeline
//                         {save_path}/step{N}/prof_rank-{R}.json (tool torch:
//                         .json.gz, as verl's torch tool), a Chrome /
//                         Perfetto trace of the step (phases, micro-batches,
//                         forward/backward, collectives with bytes); with
//                         profile_continuous_steps consecutive profiled steps
//                         share one trace, named after the first
//    PerfMetrics() gives perf/mfu/* and perf/*memory* (verl's keys).
#ifndef VERL_RL_TRAINER_TRAINER_PROFILING_H_
#define VERL_RL_TRAINER_TRAINER_PROFILING_H_

#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/models/model_config.h"
#include "verl/profiler/memory_profiler.h"
#include "verl/profiler/profile_scope.h"
#include "verl/rl/trainer/config/config.pb.h"
#include "verl/rl/trainer/metrics.h"

namespace verl::rl {

// Accumulates the seconds of its scope into (*timing)[name] and marks the
// same name on the timeline and as the memory phase.
class TrainerPhase {
 public:
  TrainerPhase(std::map<std::string, double>* timing, std::string name);
  ~TrainerPhase();
  TrainerPhase(const TrainerPhase&) = delete;
  TrainerPhase& operator=(const TrainerPhase&) = delete;

 private:
  std::map<std::string, double>* timing_;
  std::string name_;  // before scope_, which keeps a pointer to it
  std::chrono::steady_clock::time_point start_;
  // Switches the timeline on for the phase's span when a role-only trace
  // window covers this phase; declared before scope_ so that it outlives it.
  struct RoleGate {
    explicit RoleGate(const std::string& phase);
    ~RoleGate();
    bool on = false;
  } gate_;
  profiler::ProfileScope scope_;
};

class TrainerProfiler {
 public:
  // `rank` / `world_size`: this process in the world group. Starts allocation
  // recording when the actor's profiler tool is torch_memory; measures the
  // GEMM peak when global_profiler.measure_peak_flops.
  TrainerProfiler(const PpoTrainerConfig& config, int64_t rank,
                  int64_t world_size);
  ~TrainerProfiler();
  TrainerProfiler(const TrainerProfiler&) = delete;
  TrainerProfiler& operator=(const TrainerProfiler&) = delete;

  // True when step N is profiled on this rank (any role, any tool).
  bool ProfilesStep(int64_t step) const;
  absl::Status StartStep(int64_t step);  // start_profile
  absl::Status StopStep(int64_t step);   // stop_profile: writes the files
  // After every step (N = the next global step, as verl): the actor's
  // post-update memory snapshot when its tool is torch_memory.
  absl::Status AfterStep(int64_t step);

  // perf/mfu/actor (update_actor, x ppo_epochs), perf/mfu/actor_infer
  // (old_log_prob), perf/mfu/critic (update_critic) over the batch's
  // sequence lengths (attention_mask [B, L]), and perf/max_memory_*_gb,
  // perf/cpu_memory_used_gb.
  MetricMap PerfMetrics(const models::ModelConfig& model,
                        const at::Tensor& attention_mask,
                        const std::map<std::string, double>& timing) const;

  double peak_flops() const { return peak_flops_; }
  std::string TracePath(int64_t step) const;
  const profiler::MemoryProfiler& memory() const { return memory_; }

  struct Role {
    const char* name;  // "actor", "rollout", "ref", "critic", "reward_model"
    profiler::ProfilerConfig config;
    std::vector<std::string> phases;  // empty: the whole step (actor, e2e)
  };
  // The roles that profile step N on this rank with a timeline tool (torch,
  // timeline) or with torch_memory.
  std::vector<const Role*> ProfiledRoles(int64_t step, bool timeline) const;

 private:
  profiler::GlobalProfilerConfig global_;
  profiler::ProfilerConfig actor_;
  std::vector<Role> roles_;
  // The role whose torch_memory settings record (the actor's, else the
  // first role with tool torch_memory).
  profiler::ProfilerConfig memory_role_;
  int64_t rank_;
  int64_t world_size_;
  int64_t actor_epochs_ = 1;
  int64_t critic_epochs_ = 1;
  double peak_flops_ = 0;
  profiler::MemoryProfiler memory_;
  int64_t trace_step_ = -1;  // first step of the open trace window, -1: none
  std::string trace_path_;   // of the open window
  // Role-only window: the phases whose spans are recorded (empty: all).
  std::vector<std::string> trace_phases_;
  int64_t memory_step_ = -1;  // profiled step with a snapshot due, -1: none
  std::vector<std::string> memory_phases_;  // KeepPhases (empty: all)
};

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_TRAINER_PROFILING_H_
