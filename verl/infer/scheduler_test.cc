// File: verl/infer/scheduler_test.cc
#include "verl/infer/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <numeric>

namespace verl::infer {
namespace {

std::unique_ptr<Sequence> MakeSeq(int64_t id, int64_t n) {
  auto s = std::make_unique<Sequence>();
  s->seq_id = id;
  s->request_id = id;
  s->tokens.resize(n);
  std::iota(s->tokens.begin(), s->tokens.end(), 1000 * id);
  s->prompt_len = n;
  return s;
}

// Plays the engine: computes, appends a token to sampled sequences and
// finishes them after `max_new` outputs.
void FinishStep(Scheduler& sched, const SchedulerOutput& out, int64_t max_new) {
  sched.OnStepDone(out);
  for (const auto& s : out.scheduled) {
    if (!s.sample) continue;
    s.seq->tokens.push_back(7);
    if (s.seq->num_output_tokens() >= max_new) sched.Finish(s.seq);
  }
}

TEST(SchedulerTest, FcfsRespectsMaxNumSeqsAndTokenBudget) {
  BlockManager blocks(64, 4, false);
  Scheduler sched({/*max_num_seqs=*/2, /*max_num_batched_tokens=*/100,
                   /*enable_chunked_prefill=*/false},
                  &blocks);
  auto a = MakeSeq(0, 10), b = MakeSeq(1, 10), c = MakeSeq(2, 10);
  sched.Add(a.get());
  sched.Add(b.get());
  sched.Add(c.get());
  SchedulerOutput out = sched.Schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].seq, a.get());
  EXPECT_EQ(out.scheduled[1].seq, b.get());
  EXPECT_EQ(out.num_batched_tokens, 20);
  EXPECT_TRUE(out.scheduled[0].sample);
  FinishStep(sched, out, 2);
  // Decode step: one token each; c still waits for a seat.
  out = sched.Schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.num_batched_tokens, 2);
  FinishStep(sched, out, 2);  // a and b finish and leave at once
  out = sched.Schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].seq, c.get());
  EXPECT_EQ(blocks.NumAvailable(), 64 - 3);
}

TEST(SchedulerTest, NewSequencesJoinBetweenDecodeSteps) {
  BlockManager blocks(64, 4, false);
  Scheduler sched({8, 100, true}, &blocks);
  auto a = MakeSeq(0, 5);
  sched.Add(a.get());
  FinishStep(sched, sched.Schedule(), 10);
  auto b = MakeSeq(1, 6);
  sched.Add(b.get());
  SchedulerOutput out = sched.Schedule();
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);  // a decodes
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 6);  // b prefills
}

TEST(SchedulerTest, ChunkedPrefillSplitsLongPrompt) {
  BlockManager blocks(64, 4, false);
  Scheduler sched({8, 16, true}, &blocks);
  auto a = MakeSeq(0, 40);
  sched.Add(a.get());
  int steps = 0;
  while (a->num_output_tokens() == 0) {
    SchedulerOutput out = sched.Schedule();
    ASSERT_EQ(out.scheduled.size(), 1u);
    EXPECT_LE(out.num_batched_tokens, 16);
    EXPECT_EQ(out.scheduled[0].sample, steps == 2);
    FinishStep(sched, out, 5);
    ++steps;
  }
  EXPECT_EQ(steps, 3);  // 16 + 16 + 8
  EXPECT_EQ(a->num_computed, 40);
  // Without chunking the whole prompt must fit the budget.
  BlockManager blocks2(64, 4, false);
  Scheduler nochunk({8, 16, false}, &blocks2);
  auto b = MakeSeq(1, 40);
  nochunk.Add(b.get());
  EXPECT_TRUE(nochunk.Schedule().scheduled.empty());
}

TEST(SchedulerTest, PreemptsNewestWhenBlocksRunOutAndEventuallyFinishes) {
  // 6 blocks of 4 tokens; three sequences of 7 tokens each generating 8.
  BlockManager blocks(6, 4, true);
  Scheduler sched({8, 64, true}, &blocks);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 3; ++i) {
    seqs.push_back(MakeSeq(i, 7));
    sched.Add(seqs.back().get());
  }
  int64_t steps = 0;
  std::map<int64_t, int64_t> max_blocks;
  while (sched.HasUnfinished()) {
    SchedulerOutput out = sched.Schedule();
    ASSERT_FALSE(out.scheduled.empty()) << "stalled at step " << steps;
    FinishStep(sched, out, 8);
    ASSERT_LT(++steps, 200);
  }
  EXPECT_GT(sched.stats().preemptions, 0);
  int64_t preempted = 0;
  for (auto& s : seqs) {
    EXPECT_EQ(s->num_output_tokens(), 8);
    preempted += s->num_preemptions;
  }
  EXPECT_EQ(preempted, sched.stats().preemptions);
  EXPECT_EQ(seqs[0]->num_preemptions, 0);  // the oldest is never preempted
  EXPECT_EQ(blocks.NumAvailable(), 6);
}

TEST(SchedulerTest, ForkParentReservesSeatsForItsSamples) {
  BlockManager blocks(64, 4, true);
  Scheduler sched({4, 100, true}, &blocks);
  auto a = MakeSeq(0, 6);
  a->fork_n = 3;
  auto b = MakeSeq(1, 6);
  b->fork_n = 2;
  sched.Add(a.get());
  sched.Add(b.get());
  SchedulerOutput out = sched.Schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);  // 3 + 2 seats > 4
  sched.OnStepDone(out);
  // Fork a into 3 sharing its blocks.
  std::vector<std::unique_ptr<Sequence>> kids;
  a->fork_n = 1;
  for (int i = 1; i < 3; ++i) {
    kids.push_back(std::make_unique<Sequence>(*a));
    kids.back()->block_table.clear();
    blocks.Fork(*a, *kids.back());
    sched.AddForked(a.get(), kids.back().get());
  }
  a->tokens.push_back(1);
  for (auto& k : kids) k->tokens.push_back(2);
  out = sched.Schedule();
  EXPECT_EQ(out.scheduled.size(), 3u);
  EXPECT_EQ(out.copies.size(), 2u);  // two copy-on-writes of the last block
  EXPECT_EQ(sched.num_waiting(), 1);
}

}  // namespace
}  // namespace verl::infer
