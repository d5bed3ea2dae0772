// File: tools/memory_report.cc
//
// Prints the live bytes, the peak and its phase, and the top allocation sites
// of memory snapshot pickles (verl's torch_memory snapshots, or PyTorch's
// torch.cuda.memory._dump_snapshot files).
//
//   memory_report [--top=10]
//   outputs/profile/step1/torch_memory_rank0_pid1.pickle
#include "verl/profiler/memory_report.h"

#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "verl/core/main_guard.h"
#include "verl/core/pickle.h"

ABSL_FLAG(int, top, 10, "How many allocation sites to list.");

static int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "memory_report [--top=N] SNAPSHOT.pickle [SNAPSHOT.pickle ...]");
  std::vector<char*> files = absl::ParseCommandLine(argc, argv);
  if (files.size() < 2) {
    std::cerr << "usage: " << absl::ProgramUsageMessage() << "\n";
    return 2;
  }
  int rc = 0;
  for (size_t i = 1; i < files.size(); ++i) {
    const std::string path = files[i];
    auto snapshot = verl::core::ReadPickleFile(path);
    if (!snapshot.ok()) {
      std::cerr << "memory_report: " << snapshot.status().message() << "\n";
      rc = 1;
      continue;
    }
    auto report = verl::profiler::AnalyzeMemorySnapshot(
        *snapshot, absl::GetFlag(FLAGS_top));
    if (!report.ok()) {
      std::cerr << "memory_report: " << path << ": "
                << report.status().message() << "\n";
      rc = 1;
      continue;
    }
    std::cout << "== " << path << "\n"
              << verl::profiler::FormatMemoryReport(*report);
  }
  return rc;
}

int main(int argc, char** argv) {
  return verl::core::GuardMain("memory_report",
                               [&] { return Main(argc, argv); });
}
