// File: verl/infer/sequence.h
//
// One generation stream as the scheduler and block manager see it: its
// tokens (prompt, then generated), how many of them already have K/V in the
// cache, and its block table. A request with n samples starts as one
// sequence with `fork_n = n`; after its prompt is prefilled the engine forks
// it into n sequences that share the prompt blocks.
#ifndef VERL_INFER_SEQUENCE_H_
#define VERL_INFER_SEQUENCE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "verl/infer/block_allocator.h"

namespace verl::infer {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  int64_t seq_id = 0;
  int64_t request_id = 0;
  int sample_index = 0;
  int fork_n = 1;  // > 1 until the shared prompt prefill has forked

  std::vector<int64_t> tokens;  // prompt followed by generated tokens
  int64_t prompt_len = 0;
  // The leading tokens as the prefix cache names them, when they differ
  // from `tokens`: a multimodal prompt's <|image_pad|> tokens are replaced
  // by negative keys derived from the image's content, so prompts with
  // different images never share KV blocks. Null: the tokens themselves.
  // Shared by the samples of a request.
  std::shared_ptr<const std::vector<int64_t>> cache_keys;
  int64_t num_computed = 0;  // leading tokens whose K/V are in the cache

  std::vector<BlockId> block_table;
  std::vector<uint64_t> block_hashes;  // hash chain of leading full blocks
  int64_t num_registered_blocks = 0;   // full blocks offered to the cache

  SequenceStatus status = SequenceStatus::kWaiting;
  int64_t num_preemptions = 0;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output_tokens() const { return num_tokens() - prompt_len; }
};

}  // namespace verl::infer

#endif  // VERL_INFER_SEQUENCE_H_
