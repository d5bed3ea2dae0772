// File: verl/parallel/launcher_flags_test.cc
//
// Unset launcher flags take the caller's defaults (a trainer config's
// n_gpus_per_node / nnodes, a free port on one node); flags typed on the
// command line win even when they equal the built-in defaults (the old code
// took nproc_per_node == 1 and master_port == 29500 to mean "unset").
#include "verl/parallel/launcher_flags.h"

#include "absl/flags/parse.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::parallel {
namespace {

using ::verl::core::testing::StatusIs;

// What a trainer passes: its config's worker and node counts.
LaunchFlagDefaults TrainerDefaults(int n_gpus_per_node, int nnodes) {
  TrainerProcessCounts counts;
  counts.n_gpus_per_node = n_gpus_per_node;
  counts.nnodes = nnodes;
  const LaunchFlagDefaults d = TrainerLaunchDefaults(counts);
  EXPECT_EQ(d.nproc_per_node, n_gpus_per_node);
  EXPECT_EQ(d.nnodes, nnodes);
  EXPECT_TRUE(d.free_port_on_one_node);
  return d;
}

// A trainer config's `trainer` section, as the PPO and SFT protos spell it.
struct FakeTrainerSection {
  int64_t gpus, nodes;
  std::string dev;
  int64_t n_gpus_per_node() const { return gpus; }
  int64_t nnodes() const { return nodes; }
  const std::string& device() const { return dev; }
};

// A count differing from the built-in section's is one the user set.
TEST(LaunchFlagsTest, ProcessCountsOfATrainerSection) {
  const FakeTrainerSection built_in{8, 1, "cuda"};
  TrainerProcessCounts c =
      ProcessCountsOf(FakeTrainerSection{2, 1, "cpu"}, built_in);
  EXPECT_EQ(c.n_gpus_per_node, 2);
  EXPECT_TRUE(c.n_gpus_per_node_set);
  EXPECT_EQ(c.nnodes, 1);
  EXPECT_FALSE(c.nnodes_set);
  EXPECT_TRUE(c.on_cpu);
  c = ProcessCountsOf(FakeTrainerSection{8, 3, "cuda"}, built_in);
  EXPECT_FALSE(c.n_gpus_per_node_set);
  EXPECT_EQ(c.nnodes, 3);
  EXPECT_TRUE(c.nnodes_set);
  EXPECT_FALSE(c.on_cpu);
}

// One test: what was set on the command line cannot be unset again.
TEST(LaunchFlagsTest, DefaultsFillOnlyFlagsNotTyped) {
  // Nothing parsed: the built-in defaults, or the caller's.
  LaunchOptions plain = LaunchOptionsFromFlags();
  EXPECT_EQ(plain.nproc_per_node, 1);
  EXPECT_EQ(plain.nnodes, 1);
  EXPECT_EQ(plain.master_port, 29500);
  LaunchOptions one_node = LaunchOptionsFromFlags(TrainerDefaults(4, 1));
  EXPECT_EQ(one_node.nproc_per_node, 4);
  EXPECT_EQ(one_node.master_port, 0);
  LaunchOptions two_nodes = LaunchOptionsFromFlags(TrainerDefaults(4, 2));
  EXPECT_EQ(two_nodes.nnodes, 2);
  EXPECT_EQ(two_nodes.master_port, 29500);  // other nodes must know it

  // Typed explicitly, the built-in default values win over the caller's.
  char arg0[] = "launcher_flags_test";
  char arg1[] = "--nproc_per_node=1";
  char arg2[] = "--master_port=29500";
  char arg3[] = "--node_rank=0";
  char* argv[] = {arg0, arg1, arg2, arg3};
  absl::ParseCommandLine(4, argv);
  LaunchOptions typed = LaunchOptionsFromFlags(TrainerDefaults(4, 3));
  EXPECT_EQ(typed.nproc_per_node, 1);
  EXPECT_EQ(typed.master_port, 29500);
  EXPECT_EQ(typed.nnodes, 3);  // not typed: the caller's value
}

// --nproc_per_node and trainer.n_gpus_per_node are one value: a flag fills
// a key left at its default, a disagreement is an error, and verl's default
// of 8 processes is not started on a smaller CPU machine.
TEST(LaunchFlagsTest, ProcessCountsHaveOneSourceOfTruth) {
  TrainerProcessCounts counts;  // nothing set: verl's 8 x 1
  absl::Status s =
      ReconcileProcessCounts(std::nullopt, std::nullopt, 2, &counts);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("set trainer.n_gpus_per_node=N"),
            std::string::npos)
      << s;
  EXPECT_TRUE(
      ReconcileProcessCounts(std::nullopt, std::nullopt, 16, &counts).ok());
  EXPECT_EQ(counts.n_gpus_per_node, 8);

  TrainerProcessCounts flag_only;
  ASSERT_TRUE(ReconcileProcessCounts(1, 2, 2, &flag_only).ok());
  EXPECT_EQ(flag_only.n_gpus_per_node, 1);  // --nproc_per_node=1 is used
  EXPECT_EQ(flag_only.nnodes, 2);

  TrainerProcessCounts both;
  both.n_gpus_per_node = 4;
  both.n_gpus_per_node_set = true;
  ASSERT_TRUE(ReconcileProcessCounts(4, std::nullopt, 2, &both).ok());
  s = ReconcileProcessCounts(2, std::nullopt, 2, &both);
  EXPECT_EQ(s.message(),
            "--nproc_per_node=2 disagrees with trainer.n_gpus_per_node=4: give "
            "one of them (or the same value to both)");
  TrainerProcessCounts nodes;
  nodes.nnodes = 2;
  nodes.nnodes_set = true;
  nodes.n_gpus_per_node = 1;
  nodes.n_gpus_per_node_set = true;
  EXPECT_THAT(ReconcileProcessCounts(std::nullopt, 3, 2, &nodes),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--nnodes=3 disagrees with trainer.nnodes="));
  // An explicit config value is respected even beyond the core count.
  TrainerProcessCounts explicit_four;
  explicit_four.n_gpus_per_node = 4;
  explicit_four.n_gpus_per_node_set = true;
  EXPECT_TRUE(
      ReconcileProcessCounts(std::nullopt, std::nullopt, 2, &explicit_four)
          .ok());
}

}  // namespace
}  // namespace verl::parallel
