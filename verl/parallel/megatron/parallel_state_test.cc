// File: verl/parallel/megatron/parallel_state_test.cc
//
// Megatron's rank layouts as pure functions, against the layouts
// megatron/core/parallel_state.py documents and computes (order
// "tp-cp-ep-dp-pp"), and the errors for sizes that do not fit the world.
// The groups' communication is checked by megatron_test (4 processes).
#include "verl/parallel/megatron/parallel_state.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::parallel::megatron {
namespace {

using core::testing::StatusIs;
using Groups = std::vector<std::vector<int>>;

ModelParallelSizes Sizes(int tp, int pp = 1, int cp = 1, int ep = 1,
                         int etp = 0, int vpp = 0) {
  ModelParallelSizes s;
  s.tp = tp;
  s.pp = pp;
  s.cp = cp;
  s.ep = ep;
  s.etp = etp;
  s.vpp = vpp;
  return s;
}

MegatronLayout Layout(int world, ModelParallelSizes sizes) {
  absl::StatusOr<MegatronLayout> layout = MegatronLayout::Create(world, sizes);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

// The example in initialize_model_parallel's docstring: 16 GPUs, tp 2,
// pp 4 -> dp 2.
TEST(MegatronLayoutTest, DocstringExampleSixteenRanksTp2Pp4) {
  MegatronLayout l = Layout(16, Sizes(2, 4));
  EXPECT_EQ(l.dp(), 2);
  EXPECT_EQ(l.AllGroups(MpuGroup::kTp), (Groups{{0, 1},
                                                {2, 3},
                                                {4, 5},
                                                {6, 7},
                                                {8, 9},
                                                {10, 11},
                                                {12, 13},
                                                {14, 15}}));
  EXPECT_EQ(
      l.AllGroups(MpuGroup::kPp),
      (Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}));
  EXPECT_EQ(l.AllGroups(MpuGroup::kDp), (Groups{{0, 2},
                                                {1, 3},
                                                {4, 6},
                                                {5, 7},
                                                {8, 10},
                                                {9, 11},
                                                {12, 14},
                                                {13, 15}}));
  EXPECT_EQ(l.GroupRanks(MpuGroup::kMp, 5),
            (std::vector<int>{0, 1, 4, 5, 8, 9, 12, 13}));
}

TEST(MegatronLayoutTest, EightRanksTp2Pp2) {
  MegatronLayout l = Layout(8, Sizes(2, 2));
  EXPECT_EQ(l.dp(), 2);
  EXPECT_EQ(l.AllGroups(MpuGroup::kTp),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(l.AllGroups(MpuGroup::kDp),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(l.AllGroups(MpuGroup::kPp),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(l.AllGroups(MpuGroup::kMp), (Groups{{0, 1, 4, 5}, {2, 3, 6, 7}}));
  // Rank 6 = pp 1, dp 1, tp 0.
  EXPECT_EQ(l.Coordinate("pp", 6), 1);
  EXPECT_EQ(l.Coordinate("dp", 6), 1);
  EXPECT_EQ(l.Coordinate("tp", 6), 0);
  // cp = 1: the cp groups are singletons, dp x cp = dp, tp x cp = tp.
  EXPECT_EQ(l.GroupRanks(MpuGroup::kCp, 3), (std::vector<int>{3}));
  EXPECT_EQ(l.AllGroups(MpuGroup::kDpCp), l.AllGroups(MpuGroup::kDp));
  EXPECT_EQ(l.AllGroups(MpuGroup::kTpCp), l.AllGroups(MpuGroup::kTp));
}

// Context parallelism sits between tp and dp.
TEST(MegatronLayoutTest, EightRanksTp2Cp2) {
  MegatronLayout l = Layout(8, Sizes(2, 1, 2));
  EXPECT_EQ(l.dp(), 2);
  EXPECT_EQ(l.AllGroups(MpuGroup::kCp),
            (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(l.AllGroups(MpuGroup::kDp),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(l.AllGroups(MpuGroup::kTpCp), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(l.AllGroups(MpuGroup::kDpCp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
}

// Expert grid "etp-ep-edp-pp": etp defaults to tp (Megatron's None).
TEST(MegatronLayoutTest, ExpertGroups) {
  MegatronLayout l = Layout(8, Sizes(2, 1, 1, 2, 1));
  EXPECT_EQ(l.edp(), 4);
  EXPECT_EQ(l.AllGroups(MpuGroup::kEp),
            (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(l.AllGroups(MpuGroup::kEdp), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  EXPECT_EQ(l.GroupRanks(MpuGroup::kEtp, 5), (std::vector<int>{5}));
  MegatronLayout d = Layout(8, Sizes(2, 1, 1, 2));
  EXPECT_EQ(d.sizes().etp, 2);
  EXPECT_EQ(d.edp(), 2);
  EXPECT_EQ(d.AllGroups(MpuGroup::kEtpEp),
            (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(d.AllGroups(MpuGroup::kEdp),
            (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  // etp 2 with tp 1 (4 dp ranks): experts split over dp pairs.
  MegatronLayout e = Layout(4, Sizes(1, 1, 1, 2, 2));
  EXPECT_EQ(e.dp(), 4);
  EXPECT_EQ(e.edp(), 1);
  EXPECT_EQ(e.AllGroups(MpuGroup::kEtp), (Groups{{0, 1}, {2, 3}}));
  EXPECT_EQ(e.AllGroups(MpuGroup::kEp), (Groups{{0, 2}, {1, 3}}));
  EXPECT_EQ(e.AllGroups(MpuGroup::kEtpEp), (Groups{{0, 1, 2, 3}}));
}

TEST(MegatronLayoutTest, SizesThatDoNotFitAreOneLineErrors) {
  EXPECT_THAT(MegatronLayout::Create(6, Sizes(4)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.tensor_model_parallel_size=4: world size 6 is "
                       "not divisible by tp*pp*cp = 4*1*1 = 4"));
  EXPECT_THAT(MegatronLayout::Create(8, Sizes(2, 2, 4)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "tp*pp*cp"));
  EXPECT_THAT(MegatronLayout::Create(8, Sizes(2, 1, 1, 3)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.expert_model_parallel_size=3"));
  EXPECT_THAT(MegatronLayout::Create(4, Sizes(1, 1, 1, 2, 3)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.expert_tensor_parallel_size=3: world size 4 "
                       "is not divisible by etp*ep*pp = 3*2*1 = 6"));
  EXPECT_THAT(MegatronLayout::Create(4, Sizes(0)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "must be >= 1"));
  EXPECT_THAT(MegatronLayout::Create(4, Sizes(1, 1, 1, 1, 0, 2)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "virtual_pipeline_model_parallel_size=2"));
}

TEST(ParallelStateTest, SingleProcessGroupsAreTrivial) {
  auto state = ParallelState::Initialize(SingleProcessCommunicator(), {});
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ((*state)->tp_size(), 1);
  EXPECT_EQ((*state)->tp_rank(), 0);
  EXPECT_EQ((*state)->group(MpuGroup::kEdp)->size(), 1);
}

}  // namespace
}  // namespace verl::parallel::megatron
