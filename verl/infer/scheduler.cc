// File: verl/infer/scheduler.cc
#include "verl/infer/scheduler.h"

#include <glog/logging.h>

#include <algorithm>

namespace verl::infer {

Scheduler::Scheduler(SchedulerOptions options, BlockManager* blocks)
    : options_(options), blocks_(blocks) {
  CHECK_GT(options_.max_num_seqs, 0);
  CHECK_GT(options_.max_num_batched_tokens, 0);
}

void Scheduler::Add(Sequence* seq) {
  seq->status = SequenceStatus::kWaiting;
  waiting_.push_back(seq);
}

void Scheduler::AddForked(Sequence* parent, Sequence* child) {
  auto it = std::find(running_.begin(), running_.end(), parent);
  CHECK(it != running_.end()) << "fork of non-running seq " << parent->seq_id;
  child->status = SequenceStatus::kRunning;
  running_.insert(it + 1, child);
}

void Scheduler::Preempt(Sequence* seq) {
  blocks_->Free(*seq);
  seq->num_computed = 0;
  seq->status = SequenceStatus::kWaiting;
  ++seq->num_preemptions;
  ++stats_.preemptions;
  waiting_.push_front(seq);
}

void Scheduler::Schedule(SchedulerOutput* out_ptr) {
  SchedulerOutput& out = *out_ptr;
  out.scheduled.clear();
  out.num_batched_tokens = 0;
  out.num_preempted = 0;
  int64_t budget = options_.max_num_batched_tokens;
  const int64_t preempted_before = stats_.preemptions;

  // 1. Running sequences, oldest first; preempt the newest when out of
  // blocks. running_[next, end) are the ones not visited yet.
  kept_.clear();
  size_t next = 0, end = running_.size();
  while (next < end) {
    Sequence* seq = running_[next++];
    int64_t num_new = seq->num_tokens() - seq->num_computed;
    CHECK_GT(num_new, 0) << "running seq " << seq->seq_id << " has no work";
    if (num_new > budget) {
      if (!options_.enable_chunked_prefill || budget == 0) {
        kept_.push_back(seq);  // waits for the next step, keeps its blocks
        continue;
      }
      num_new = budget;
    }
    bool ok = true;
    while (!blocks_->Reserve(*seq, seq->num_computed + num_new)) {
      if (next == end) {
        ok = false;
        break;
      }
      Preempt(running_[--end]);
    }
    if (!ok) {
      // Nothing newer left to evict: preempt this sequence itself, unless
      // older sequences are already scheduled and will free blocks later.
      Preempt(seq);
      continue;
    }
    kept_.push_back(seq);
    out.scheduled.push_back(
        {seq, num_new, seq->num_computed + num_new == seq->num_tokens()});
    budget -= num_new;
  }
  running_.swap(kept_);

  // 2. Admit waiting sequences in FCFS order (none if we just preempted).
  int64_t seats = 0;
  for (Sequence* s : running_) seats += Seats(s);
  while (!waiting_.empty() && stats_.preemptions == preempted_before &&
         budget > 0) {
    Sequence* seq = waiting_.front();
    if (seats + Seats(seq) > options_.max_num_seqs) break;
    int64_t cached = 0;
    if (seq->block_table.empty()) cached = blocks_->MatchPrefix(*seq);
    int64_t num_new = seq->num_tokens() - seq->num_computed;
    if (num_new > budget) {
      if (!options_.enable_chunked_prefill) {
        blocks_->Free(*seq);
        seq->num_computed = 0;
        break;
      }
      num_new = budget;
    }
    if (!blocks_->Reserve(*seq, seq->num_computed + num_new)) {
      blocks_->Free(*seq);  // give back the prefix blocks it took
      seq->num_computed = 0;
      break;
    }
    waiting_.pop_front();
    seq->status = SequenceStatus::kRunning;
    running_.push_back(seq);
    seats += Seats(seq);
    stats_.prefix_cached_tokens += cached;
    out.scheduled.push_back(
        {seq, num_new, seq->num_computed + num_new == seq->num_tokens()});
    budget -= num_new;
  }

  blocks_->TakeCopies(&out.copies);
  for (const ScheduledSequence& s : out.scheduled) {
    out.num_batched_tokens += s.num_new_tokens;
    if (s.num_new_tokens == 1 && s.seq->num_computed >= s.seq->prompt_len) {
      ++stats_.decode_tokens;
    } else {
      stats_.prefill_tokens += s.num_new_tokens;
    }
  }
  out.num_preempted = stats_.preemptions - preempted_before;
  stats_.scheduled_tokens += out.num_batched_tokens;
  ++stats_.steps;
}

void Scheduler::OnStepDone(const SchedulerOutput& out) {
  for (const ScheduledSequence& s : out.scheduled) {
    s.seq->num_computed += s.num_new_tokens;
    blocks_->CommitFullBlocks(*s.seq);
  }
}

void Scheduler::Finish(Sequence* seq) {
  auto it = std::find(running_.begin(), running_.end(), seq);
  if (it != running_.end()) {
    running_.erase(it);
  } else {
    auto wt = std::find(waiting_.begin(), waiting_.end(), seq);
    if (wt != waiting_.end()) waiting_.erase(wt);
  }
  blocks_->Free(*seq);
  seq->status = SequenceStatus::kFinished;
}

void Scheduler::PreemptAll() {
  while (!running_.empty()) {
    Sequence* seq = running_.back();
    running_.pop_back();
    Preempt(seq);
  }
}

void Scheduler::Abort(int64_t request_id) {
  std::vector<Sequence*> victims;
  for (Sequence* s : running_) {
    if (s->request_id == request_id) victims.push_back(s);
  }
  for (Sequence* s : waiting_) {
    if (s->request_id == request_id) victims.push_back(s);
  }
  for (Sequence* s : victims) Finish(s);
}

}  // namespace verl::infer
