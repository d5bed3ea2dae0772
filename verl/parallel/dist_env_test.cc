// File: verl/parallel/dist_env_test.cc
#include "verl/parallel/dist_env.h"

#include <map>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::parallel {
namespace {

using ::verl::core::testing::StatusIs;

using ::testing::HasSubstr;

using Vars = std::map<std::string, std::string>;

absl::StatusOr<DistEnv> Parse(const Vars& vars) {
  return ParseDistEnv(
      [&](const std::string& name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) return std::nullopt;
        return it->second;
      });
}

TEST(DistEnvTest, EmptyEnvironmentIsSingleProcess) {
  auto env = Parse({});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->local_rank, 0);
  EXPECT_EQ(env->local_world_size, 1);
  EXPECT_EQ(env->master_addr, "127.0.0.1");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_EQ(env->source, "default");
  EXPECT_FALSE(env->is_distributed());
}

TEST(DistEnvTest, FullTorchrunContract) {
  auto env = Parse({{"RANK", "5"},
                    {"WORLD_SIZE", "8"},
                    {"LOCAL_RANK", "1"},
                    {"LOCAL_WORLD_SIZE", "4"},
                    {"GROUP_RANK", "1"},
                    {"MASTER_ADDR", "10.0.0.7"},
                    {"MASTER_PORT", "12345"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->rank, 5);
  EXPECT_EQ(env->world_size, 8);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->group_rank, 1);
  EXPECT_EQ(env->master_addr, "10.0.0.7");
  EXPECT_EQ(env->master_port, 12345);
  EXPECT_EQ(env->source, "torchrun");
  EXPECT_TRUE(env->is_distributed());
}

TEST(DistEnvTest, LocalValuesDefaultToSingleNode) {
  auto env =
      Parse({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_PORT", "2000"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 3);
  EXPECT_EQ(env->local_world_size, 4);
  EXPECT_EQ(env->group_rank, 0);
}

TEST(DistEnvTest, GroupRankDerivedFromLocalWorldSize) {
  auto env = Parse({{"RANK", "5"},
                    {"WORLD_SIZE", "8"},
                    {"LOCAL_WORLD_SIZE", "4"},
                    {"MASTER_ADDR", "node0"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->group_rank, 1);
}

TEST(DistEnvTest, ToEnvVarsRoundTrips) {
  DistEnv in;
  in.rank = 6;
  in.world_size = 8;
  in.local_rank = 2;
  in.local_world_size = 4;
  in.group_rank = 1;
  in.master_addr = "host";
  in.master_port = 4242;
  Vars vars;
  for (const auto& [k, v] : in.ToEnvVars()) vars[k] = v;
  EXPECT_EQ(vars.at("ROLE_RANK"), "6");
  EXPECT_EQ(vars.at("TORCHELASTIC_RESTART_COUNT"), "0");
  auto out = Parse(vars);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->rank, 6);
  EXPECT_EQ(out->world_size, 8);
  EXPECT_EQ(out->local_rank, 2);
  EXPECT_EQ(out->local_world_size, 4);
  EXPECT_EQ(out->group_rank, 1);
  EXPECT_EQ(out->master_addr, "host");
  EXPECT_EQ(out->master_port, 4242);
}

TEST(DistEnvTest, SlurmAndMpiNeedMasterAddr) {
  // Without MASTER_ADDR the scheduler variables are ignored.
  auto plain = Parse({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->world_size, 1);

  auto slurm = Parse({{"SLURM_PROCID", "3"},
                      {"SLURM_NTASKS", "4"},
                      {"SLURM_LOCALID", "1"},
                      {"SLURM_NTASKS_PER_NODE", "2(x2)"},
                      {"SLURM_NODEID", "1"},
                      {"MASTER_ADDR", "n0"}});
  ASSERT_TRUE(slurm.ok()) << slurm.status();
  EXPECT_EQ(slurm->source, "slurm");
  EXPECT_EQ(slurm->rank, 3);
  EXPECT_EQ(slurm->local_world_size, 2);
  EXPECT_EQ(slurm->group_rank, 1);

  auto mpi = Parse({{"OMPI_COMM_WORLD_RANK", "2"},
                    {"OMPI_COMM_WORLD_SIZE", "4"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                    {"MASTER_ADDR", "n0"}});
  ASSERT_TRUE(mpi.ok()) << mpi.status();
  EXPECT_EQ(mpi->source, "mpi");
  EXPECT_EQ(mpi->rank, 2);
  EXPECT_EQ(mpi->group_rank, 1);
}

struct BadCase {
  Vars vars;
  std::string message;  // Expected substring of the error.
};

TEST(DistEnvTest, MalformedValuesGiveOneLineErrors) {
  const std::vector<BadCase> cases = {
      {{{"RANK", "0"}}, "only one of RANK and WORLD_SIZE"},
      {{{"WORLD_SIZE", "2"}}, "only one of RANK and WORLD_SIZE"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK='x' is not an integer"},
      {{{"RANK", "1"}, {"WORLD_SIZE", "two"}}, "WORLD_SIZE='two'"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "WORLD_SIZE=0 must be >= 1"},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "2"}}, "RANK=-1 must be >= 0"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}},
       "RANK=2 is outside [0, WORLD_SIZE=2)"},
      {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}},
       "LOCAL_RANK=2 is outside [0, LOCAL_WORLD_SIZE=2)"},
      {{{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"LOCAL_WORLD_SIZE", "3"}},
       "LOCAL_WORLD_SIZE=3 is outside [1, WORLD_SIZE=2]"},
      {{{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}},
       "MASTER_ADDR is required for a multi-node job"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}},
       "MASTER_PORT=70000 is outside [1, 65535]"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "0"}},
       "MASTER_PORT=0 must be >= 1"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "80a"}},
       "MASTER_PORT='80a' is not an integer"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", ""}},
       "MASTER_ADDR is empty"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}, "is not an integer"},
  };
  for (const BadCase& c : cases) {
    auto env = Parse(c.vars);
    ASSERT_THAT(env, StatusIs(absl::StatusCode::kInvalidArgument))
        << "expected failure for " << c.message;
    EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(env.status().message()), HasSubstr(c.message));
    EXPECT_EQ(std::string(env.status().message()).find('\n'),
              std::string::npos);
  }
}

}  // namespace
}  // namespace verl::parallel
