// File: verl/parallel/threads.cc
#include "verl/parallel/threads.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace verl::parallel {

absl::StatusOr<int> ResolveIntraOpThreads(
    int configured, const std::optional<std::string>& omp_num_threads,
    int hardware_threads, int local_world_size) {
  if (configured > 0) return configured;
  if (omp_num_threads.has_value()) {
    int parsed = 0;
    if (!absl::SimpleAtoi(*omp_num_threads, &parsed) || parsed < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable OMP_NUM_THREADS='",
                       *omp_num_threads, "' is not a positive integer"));
    }
    return parsed;
  }
  return std::max(1, hardware_threads / std::max(1, local_world_size));
}

absl::StatusOr<int> SetIntraOpThreads(int configured, int local_world_size) {
  std::optional<std::string> omp;
  if (const char* value = std::getenv("OMP_NUM_THREADS")) omp = value;
  const int hardware =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  absl::StatusOr<int> threads =
      ResolveIntraOpThreads(configured, omp, hardware, local_world_size);
  if (!threads.ok()) return threads.status();
  at::set_num_threads(*threads);
  return at::get_num_threads();
}

}  // namespace verl::parallel
