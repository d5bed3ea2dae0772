// File: verl/parallel/test_worker.h
//
// For multi-process tests: runs a test worker binary from the test's
// runfiles as `nproc` ranks on this host (launcher.h's RunWorkers, a free
// master port) and returns the job's exit code (-1, with a gtest failure,
// when the job could not be started).
//
//   EXPECT_EQ(RunTestWorker("verl/models/my_worker", 2, {"--case=a"}), 0);
//
// and, in the worker's main, JoinTestJob() for its rank's context.
#ifndef VERL_PARALLEL_TEST_WORKER_H_
#define VERL_PARALLEL_TEST_WORKER_H_

#include <string>
#include <vector>

#include "verl/parallel/distributed.h"

namespace verl::parallel {

// `runfile` is the worker's path relative to the workspace root.
int RunTestWorker(const std::string& runfile, int nproc,
                  const std::vector<std::string>& args);

// The worker side: joins the job RunTestWorker started (InitDistributed).
// A failure is fatal ("init failed: ..."): the test sees the exit code.
DistributedContext JoinTestJob();

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_TEST_WORKER_H_
