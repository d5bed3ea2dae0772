// File: verl/rl/trainer_profiling.cc
#include "verl/rl/trainer_profiling.h"

#include <ATen/core/grad_mode.h>
#include <sys/resource.h>
#include <torch/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
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

}  // namespace

TrainerPhase::TrainerPhase(std::map<std::string, double>* timing,
                           std::string name)
    : timing_(timing),
      name_(std::move(name)),
      start_(Clock::now()),
      scope_(name_.c_str()) {}

TrainerPhase::~TrainerPhase() {
  (*timing_)[name_] +=
      std::chrono::duration<double>(Clock::now() - start_).count();
}

profiler::FlopsModelDims FlopsDims(const models::ModelConfig& c) {
  profiler::FlopsModelDims d;
  d.vocab_size = c.vocab_size;
  d.hidden_size = c.hidden_size;
  d.intermediate_size = c.intermediate_size;
  d.num_hidden_layers = c.num_hidden_layers;
  d.num_attention_heads = c.num_attention_heads;
  d.num_key_value_heads = c.num_key_value_heads;
  d.head_dim = c.HeadDim();
  if (c.IsMoe()) {
    d.num_experts = c.num_experts;
    d.num_experts_per_tok = c.num_experts_per_tok;
    d.moe_intermediate_size = c.moe_intermediate_size;
    d.shared_expert_intermediate_size = c.shared_expert_intermediate_size;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l)
      d.moe_layers += c.LayerIsMoe(l) ? 1 : 0;
  }
  return d;
}

double MeasureGemmFlops(int64_t n) {
  at::NoGradGuard no_grad;
  at::Tensor a = torch::randn({n, n}), b = torch::randn({n, n});
  at::Tensor c = torch::matmul(a, b);  // warm-up
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    c = torch::matmul(a, b);
    best = std::min(best,
                    std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return 2.0 * n * n * n / best;
}

TrainerProfiler::TrainerProfiler(const PpoTrainerConfig& config, int64_t rank,
                                 int64_t world_size)
    : global_(config.global_profiler()),
      actor_(ActorProfiler(config)),
      rank_(rank),
      world_size_(world_size),
      memory_(global_, actor_, rank) {
  const ActorConfig& actor = config.actor_rollout_ref().actor();
  actor_epochs_ = actor.ppo_epochs();
  critic_epochs_ = config.critic().has_ppo_epochs()
                       ? config.critic().ppo_epochs()
                       : actor_epochs_;
  if (global_.measure_peak_flops()) {
    peak_flops_ = MeasureGemmFlops();
  } else if (global_.has_peak_flops()) {
    peak_flops_ = global_.peak_flops();
  } else {
    peak_flops_ = profiler::PromisedFlops(
        absl::AsciiStrToUpper(config.trainer().device()));
  }
}

TrainerProfiler::~TrainerProfiler() {
  if (trace_step_ >= 0) profiler::Timeline::Global().Disable();
}

bool TrainerProfiler::TimelineTool() const {
  return actor_.has_tool() &&
         (actor_.tool() == profiler::ProfilerTool::torch ||
          actor_.tool() == profiler::ProfilerTool::timeline);
}

bool TrainerProfiler::ProfilesStep(int64_t step) const {
  return actor_.has_tool() &&
         profiler::RoleProfilesStep(global_, actor_, step, rank_);
}

std::string TrainerProfiler::TracePath(int64_t step) const {
  const std::string& dir =
      actor_.has_save_path() ? actor_.save_path() : global_.save_path();
  return absl::StrCat(dir, "/step", step, "/prof_rank-", rank_, ".json");
}

absl::Status TrainerProfiler::StartStep(int64_t step) {
  VERL_RETURN_IF_ERROR(memory_.StartStep(step));
  if (!TimelineTool() || !ProfilesStep(step) || trace_step_ >= 0) {
    return absl::OkStatus();
  }
  profiler::Timeline& timeline = profiler::Timeline::Global();
  timeline.Clear();
  timeline.Enable(rank_);
  trace_step_ = step;
  return absl::OkStatus();
}

absl::Status TrainerProfiler::StopStep(int64_t step) {
  VERL_RETURN_IF_ERROR(memory_.StopStep());
  if (trace_step_ < 0) return absl::OkStatus();
  // Continuous mode: keep one trace open over consecutive profiled steps.
  if (global_.profile_continuous_steps() && ProfilesStep(step + 1)) {
    return absl::OkStatus();
  }
  profiler::Timeline& timeline = profiler::Timeline::Global();
  timeline.Disable();
  const int64_t first = trace_step_;
  trace_step_ = -1;
  return Annotate(timeline.WriteJson(TracePath(first)),
                  absl::StrCat("timeline of step ", first, " on rank ", rank_));
}

absl::Status TrainerProfiler::AfterStep(int64_t step) {
  return memory_.DumpPostUpdate(step);
}

MetricMap TrainerProfiler::PerfMetrics(
    const models::ModelConfig& model, const at::Tensor& attention_mask,
    const std::map<std::string, double>& timing) const {
  at::Tensor lens = attention_mask.sum(1).to(torch::kLong).contiguous();
  std::vector<int64_t> seqlens(lens.data_ptr<int64_t>(),
                               lens.data_ptr<int64_t>() + lens.numel());
  MetricMap m =
      ComputeMfuMetrics(FlopsDims(model), seqlens, timing, actor_epochs_,
                        critic_epochs_, peak_flops_, world_size_);
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
