// File: verl/parallel/launcher_flags_test.cc
//
// Unset launcher flags take the caller's defaults (a trainer config's
// n_gpus_per_node / nnodes, a free port on one node); flags typed on the
// command line win even when they equal the built-in defaults (the old code
// took nproc_per_node == 1 and master_port == 29500 to mean "unset").
#include "verl/parallel/launcher_flags.h"

#include "absl/flags/parse.h"
#include "gtest/gtest.h"

namespace verl::parallel {
namespace {

// What a trainer passes: its config's worker and node counts.
LaunchFlagDefaults TrainerDefaults(int n_gpus_per_node, int nnodes) {
  LaunchFlagDefaults d;
  d.nproc_per_node = n_gpus_per_node;
  d.nnodes = nnodes;
  d.free_port_on_one_node = true;
  return d;
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

}  // namespace
}  // namespace verl::parallel
