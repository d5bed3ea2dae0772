// File: verl/parallel/test_worker.cc
#include "verl/parallel/test_worker.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "verl/parallel/launcher.h"

namespace verl::parallel {

int RunTestWorker(const std::string& runfile, int nproc,
                  const std::vector<std::string>& args) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string program = absl::StrCat(
      srcdir ? srcdir : ".", "/", workspace ? workspace : "verl", "/", runfile);
  LaunchOptions options;
  options.nproc_per_node = nproc;
  options.master_port = 0;
  absl::StatusOr<int> code = RunWorkers(program, args, options);
  EXPECT_TRUE(code.ok()) << code.status();
  return code.ok() ? *code : -1;
}

DistributedContext JoinTestJob() {
  absl::StatusOr<DistributedContext> dist = InitDistributed();
  CHECK(dist.ok()) << "init failed: " << dist.status();
  return *std::move(dist);
}

}  // namespace verl::parallel
