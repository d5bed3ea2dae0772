// File: verl/infer/scheduler.h
//
// Continuous-batching scheduler (vLLM-style, FCFS). Every step it grants
// each running sequence its next tokens (one for decode, a chunk for a
// prefill in progress), then admits waiting sequences in arrival order
// while `max_num_seqs`, the `max_num_batched_tokens` budget and free KV
// blocks allow. A sequence is "scheduled" for tokens [num_computed,
// num_computed + num_new); once all its tokens are computed the engine
// samples the next one. When blocks run out for a running sequence the most
// recently admitted running sequence is preempted: its blocks are freed and
// it goes back to the front of the waiting queue to be recomputed later
// (prefix caching often makes that cheap). Finished sequences leave at once.
#ifndef VERL_INFER_SCHEDULER_H_
#define VERL_INFER_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <vector>

#include "verl/infer/block_manager.h"
#include "verl/infer/sequence.h"

namespace verl::infer {

struct SchedulerOptions {
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 8192;
  bool enable_chunked_prefill = true;
};

struct ScheduledSequence {
  Sequence* seq = nullptr;
  int64_t num_new_tokens = 0;
  // True when this step computes the sequence's last token, so the engine
  // samples a new token from its logits.
  bool sample = false;
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> scheduled;
  std::vector<BlockCopy> copies;  // perform before the forward
  int64_t num_batched_tokens = 0;
  int64_t num_preempted = 0;  // in this step
};

struct SchedulerStats {
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t scheduled_tokens = 0;
  int64_t prefix_cached_tokens = 0;  // prompt tokens served by the cache
  int64_t prefill_tokens = 0;        // tokens scheduled that were not decode
  int64_t decode_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, BlockManager* blocks);

  // Appends a new sequence to the waiting queue (FCFS).
  void Add(Sequence* seq);
  // Adds a sequence forked from a running one right after it in the running
  // queue (it shares the parent's blocks and computed tokens).
  void AddForked(Sequence* parent, Sequence* child);

  // The next step's work into *out (its vectors reused: no allocation
  // once they and the queues have grown to the batch).
  void Schedule(SchedulerOutput* out);
  SchedulerOutput Schedule() {
    SchedulerOutput out;
    Schedule(&out);
    return out;
  }
  // Advances num_computed after the forward and registers full blocks.
  void OnStepDone(const SchedulerOutput& out);
  // Removes a running sequence and frees its blocks.
  void Finish(Sequence* seq);
  // Removes every sequence (running or waiting) of a request, freeing blocks.
  void Abort(int64_t request_id);
  // Preempts every running sequence (e.g. before the KV cache is freed);
  // they keep their order at the front of the waiting queue.
  void PreemptAll();

  bool HasUnfinished() const { return !waiting_.empty() || !running_.empty(); }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  const SchedulerStats& stats() const { return stats_; }
  const SchedulerOptions& options() const { return options_; }

 private:
  void Preempt(Sequence* seq);
  // Seats a sequence takes once admitted (a parent reserves its forks).
  static int64_t Seats(const Sequence* seq) { return seq->fork_n; }

  SchedulerOptions options_;
  BlockManager* blocks_;
  std::deque<Sequence*> waiting_;
  // Admission order. A vector, not a deque: Schedule rebuilds it every
  // step (into kept_, then swapped), where a deque would free and
  // re-allocate its nodes.
  std::vector<Sequence*> running_;
  std::vector<Sequence*> kept_;
  SchedulerStats stats_;
};

}  // namespace verl::infer

#endif  // VERL_INFER_SCHEDULER_H_
