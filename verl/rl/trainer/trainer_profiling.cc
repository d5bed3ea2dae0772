// File: verl/rl/trainer/trainer_profiling.cc
#include "verl/rl/trainer/trainer_profiling.h"

#include <ATen/core/grad_mode.h>
#include <sys/resource.h>
#include <torch/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/status.h"
#include "verl/models/flops_dims.h"
#include "verl/profiler/build_config.h"
#include "verl/profiler/flops_counter.h"
#include "verl/profiler/gemm_peak.h"
#include "verl/profiler/memory_tracker.h"
#include "verl/profiler/timeline.h"

namespace verl::rl {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Peak and current resident set of this process, in bytes.
int64_t PeakRssBytes() {
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // KiB on Linux
}

int64_t CurrentRssBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return n == 2 ? static_cast<int64_t>(resident) * sysconf(_SC_PAGESIZE) : 0;
}

profiler::ProfilerConfig ActorProfiler(const PpoTrainerConfig& config) {
  return config.actor_rollout_ref().actor().profiler();
}

// Each role's resolved block and the trainer phases it covers.
std::vector<TrainerProfiler::Role> Roles(const PpoTrainerConfig& config) {
  const auto& arr = config.actor_rollout_ref();
  return {
      {"actor", arr.actor().profiler(), {}},
      {"rollout", arr.rollout().profiler(), {"gen", "gen_max"}},
      {"ref", arr.ref().profiler(), {"ref"}},
      {"critic", config.critic().profiler(), {"values", "update_critic"}},
      {"reward_model", config.reward_model().profiler(), {"reward"}},
  };
}

bool IsTimelineTool(const profiler::ProfilerConfig& role) {
  return role.has_tool() && (role.tool() == profiler::ProfilerTool::torch ||
                             role.tool() == profiler::ProfilerTool::timeline);
}

bool IsMemoryTool(const profiler::ProfilerConfig& role) {
  return role.has_tool() && role.tool() == profiler::ProfilerTool::torch_memory;
}

// The actor's block when its tool is torch_memory, else the first role's
// that is; else the actor's (nothing records).
profiler::ProfilerConfig MemoryRole(const PpoTrainerConfig& config) {
  for (const TrainerProfiler::Role& r : Roles(config)) {
    if (IsMemoryTool(r.config)) return r.config;
  }
  return ActorProfiler(config);
}

// A role-only trace window: the phases whose spans are recorded while the
// timeline is otherwise off, and the rank they are recorded for.
std::atomic<const std::vector<std::string>*> g_traced_phases{nullptr};
std::atomic<int64_t> g_traced_rank{0};

}  // namespace

TrainerPhase::RoleGate::RoleGate(const std::string& phase) {
  const std::vector<std::string>* phases = g_traced_phases.load();
  profiler::Timeline& timeline = profiler::Timeline::Global();
  if (phases == nullptr || timeline.enabled() ||
      std::find(phases->begin(), phases->end(), phase) == phases->end()) {
    return;
  }
  timeline.Enable(g_traced_rank.load());
  on = true;
}

TrainerPhase::RoleGate::~RoleGate() {
  if (on) profiler::Timeline::Global().Disable();
}

TrainerPhase::TrainerPhase(std::map<std::string, double>* timing,
                           std::string name)
    : timing_(timing),
      name_(std::move(name)),
      start_(Clock::now()),
      gate_(name_),
      scope_(name_.c_str()) {}

TrainerPhase::~TrainerPhase() {
  (*timing_)[name_] +=
      std::chrono::duration<double>(Clock::now() - start_).count();
}

TrainerProfiler::TrainerProfiler(const PpoTrainerConfig& config, int64_t rank,
                                 int64_t world_size)
    : global_(config.global_profiler()),
      actor_(ActorProfiler(config)),
      roles_(Roles(config)),
      memory_role_(MemoryRole(config)),
      rank_(rank),
      world_size_(world_size),
      memory_(global_, memory_role_, rank) {
  if (!profiler::ProfilerCompiledIn()) {
    for (const Role& r : roles_) {
      if (r.config.has_tool()) {
        LOG(WARNING) << "global_profiler / " << r.name << ".profiler.tool="
                     << profiler::ProfilerTool::Value_Name(r.config.tool())
                     << ": " << profiler::kProfilerCompiledOutMessage;
        break;
      }
    }
  }
  const ActorConfig& actor = config.actor_rollout_ref().actor();
  actor_epochs_ = actor.ppo_epochs();
  critic_epochs_ = config.critic().has_ppo_epochs()
                       ? config.critic().ppo_epochs()
                       : actor_epochs_;
  if (global_.measure_peak_flops()) {
    peak_flops_ = profiler::MeasureGemmFlops();
  } else if (global_.has_peak_flops()) {
    peak_flops_ = global_.peak_flops();
  } else {
    peak_flops_ = profiler::PromisedFlops(
        absl::AsciiStrToUpper(config.trainer().device()));
  }
}

TrainerProfiler::~TrainerProfiler() {
  if (trace_step_ >= 0) {
    g_traced_phases.store(nullptr);
    profiler::Timeline::Global().Disable();
  }
}

std::vector<const TrainerProfiler::Role*> TrainerProfiler::ProfiledRoles(
    int64_t step, bool timeline) const {
  std::vector<const Role*> out;
  if (!profiler::ProfilerCompiledIn()) return out;  // nothing to write
  for (const Role& r : roles_) {
    if ((timeline ? IsTimelineTool(r.config) : IsMemoryTool(r.config)) &&
        profiler::RoleProfilesStep(global_, r.config, step, rank_)) {
      out.push_back(&r);
    }
  }
  return out;
}

bool TrainerProfiler::ProfilesStep(int64_t step) const {
  return !ProfiledRoles(step, true).empty() ||
         !ProfiledRoles(step, false).empty();
}

// The phases the roles cover; empty when one of them is the whole step.
static std::vector<std::string> CoveredPhases(
    const std::vector<const TrainerProfiler::Role*>& roles) {
  std::vector<std::string> phases;
  for (const TrainerProfiler::Role* r : roles) {
    if (r->phases.empty()) return {};
    phases.insert(phases.end(), r->phases.begin(), r->phases.end());
  }
  return phases;
}

std::string TrainerProfiler::TracePath(int64_t step) const {
  // The first profiled role's save_path and tool name the file.
  const std::vector<const Role*> roles = ProfiledRoles(step, true);
  const profiler::ProfilerConfig& role =
      roles.empty() ? actor_ : roles.front()->config;
  const std::string& dir =
      role.has_save_path() ? role.save_path() : global_.save_path();
  const bool gz =
      role.has_tool() && role.tool() == profiler::ProfilerTool::torch;
  return absl::StrCat(dir, "/step", step, "/prof_rank-", rank_,
                      gz ? ".json.gz" : ".json");
}

absl::Status TrainerProfiler::StartStep(int64_t step) {
  const std::vector<const Role*> memory_roles = ProfiledRoles(step, false);
  memory_step_ = memory_roles.empty() ? -1 : step;
  memory_phases_ = CoveredPhases(memory_roles);
  const std::vector<const Role*> roles = ProfiledRoles(step, true);
  if (roles.empty() || trace_step_ >= 0) return absl::OkStatus();
  profiler::Timeline& timeline = profiler::Timeline::Global();
  timeline.Clear();
  trace_step_ = step;
  trace_path_ = TracePath(step);
  trace_phases_ = CoveredPhases(roles);
  if (trace_phases_.empty()) {
    timeline.Enable(rank_);  // e2e: the whole step
  } else {
    g_traced_rank.store(rank_);
    g_traced_phases.store(&trace_phases_);
  }
  return absl::OkStatus();
}

absl::Status TrainerProfiler::StopStep(int64_t step) {
  if (memory_step_ >= 0) {
    const int64_t s = memory_step_;
    memory_step_ = -1;
    VERL_RETURN_IF_ERROR(memory_.WriteStepSnapshot(s, memory_phases_));
  }
  if (trace_step_ < 0) return absl::OkStatus();
  // Continuous mode: keep one trace open over consecutive profiled steps.
  if (global_.profile_continuous_steps() &&
      !ProfiledRoles(step + 1, true).empty()) {
    return absl::OkStatus();
  }
  profiler::Timeline& timeline = profiler::Timeline::Global();
  g_traced_phases.store(nullptr);
  timeline.Disable();
  const int64_t first = trace_step_;
  trace_step_ = -1;
  return Annotate(timeline.WriteJson(trace_path_),
                  absl::StrCat("timeline of step ", first, " on rank ", rank_));
}

absl::Status TrainerProfiler::AfterStep(int64_t step) {
  // verl writes the post-update snapshot for the actor only.
  if (!IsMemoryTool(actor_)) return absl::OkStatus();
  return memory_.DumpPostUpdate(step);
}

MetricMap TrainerProfiler::PerfMetrics(
    const models::ModelConfig& model, const at::Tensor& attention_mask,
    const std::map<std::string, double>& timing) const {
  at::Tensor lens = attention_mask.sum(1).to(torch::kLong).contiguous();
  std::vector<int64_t> seqlens(lens.data_ptr<int64_t>(),
                               lens.data_ptr<int64_t>() + lens.numel());
  MetricMap m = ComputeMfuMetrics(models::FlopsDims(model), seqlens, timing,
                                  actor_epochs_, critic_epochs_, peak_flops_,
                                  world_size_);
  // CPU: exact tracked peak when recording, else the process's peak RSS.
  const int64_t peak_rss = PeakRssBytes();
  const profiler::MemoryTracker& tracker = profiler::MemoryTracker::Global();
  const int64_t allocated =
      tracker.enabled() ? tracker.Stats().peak_bytes : peak_rss;
  m["perf/max_memory_allocated_gb"] = allocated / kGiB;
  m["perf/max_memory_reserved_gb"] = peak_rss / kGiB;
  m["perf/cpu_memory_used_gb"] = CurrentRssBytes() / kGiB;
  return m;
}

}  // namespace verl::rl
