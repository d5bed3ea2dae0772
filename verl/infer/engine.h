// File: verl/infer/engine.h
//
// LLMEngine: the offline / colocated rollout engine (vLLM's LLMEngine).
// Requests (prompt token ids + SamplingParams) enter a continuous-batching
// Scheduler; every Step() runs ONE packed forward of the model over all
// scheduled tokens (prefill chunks and decodes together) through the
// PagedAttention backend, samples the sequences whose tokens are all
// computed, and returns the requests that finished. A request with n
// samples prefills its prompt once and then forks into n sequences sharing
// the prompt's KV blocks (copy-on-write for the partial last block).
//
// Vision-language models (models::vlm::Qwen2VLForConditionalGeneration): a
// request may carry images (MultiModalInput). Its M-RoPE positions come
// from RopeIndex at AddRequest; the vision tower runs once per request, the
// first time a step computes one of its <|image_pad|> tokens, and the
// embeddings are spliced at the pad positions of every prefill chunk (and
// of recomputation after preemption). A step without image tokens runs the
// text path with 1-D positions (the three M-RoPE rows are equal there;
// generated token i sits at prompt_len + i + delta). The prefix cache names
// image pads by the image's content, so samples and requests with the same
// image share its KV blocks and different images never do.
//
// Tensor parallelism (EngineOptions::tp_group of size tp > 1, verl's
// rollout.tensor_model_parallel_size; tensor_parallel.h): every rank of the
// group runs its own LLMEngine over this rank's shard of the model — heads
// and MLP columns split, one all-reduce per attention and per MLP block,
// the KV cache holding only the local KV heads, the LM head vocab-parallel
// and all-gathered — and must be given the same requests in the same order:
// all ranks then schedule, sample and return the same tokens. CPU; dense
// and Qwen2/3-MoE decoders (MLA, sigmoid-routed MoE and vision-language
// models are refused); fp32
// runs the fused path, bf16 the model's own forward (row-parallel layers
// all-reduce through their output hooks).
//
// Lifecycle for RL (verl's hybrid engine): Sleep() frees the KV cache
// during training, WakeUp() re-allocates it, UpdateWeights() copies the
// trainer's tensors into the model's parameters by HF name, in place.
#ifndef VERL_INFER_ENGINE_H_
#define VERL_INFER_ENGINE_H_

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/infer/fused_forward.h"
#include "verl/infer/kv_cache.h"
#include "verl/infer/paged_attention.h"
#include "verl/infer/sampler.h"
#include "verl/infer/sampling_params.h"
#include "verl/infer/scheduler.h"
#include "verl/models/decoder.h"
#include "verl/parallel/process_group.h"

namespace verl::infer {

// Engine settings (the rollout config keys that concern the engine).
struct EngineOptions {
  int64_t block_size = 16;
  // KV budget: `num_kv_blocks` if > 0, else `kv_cache_bytes` if > 0, else
  // gpu_memory_utilization x MemAvailable (CPU) at creation.
  int64_t num_kv_blocks = 0;
  int64_t kv_cache_bytes = 0;
  double gpu_memory_utilization = 0.5;
  int64_t max_num_seqs = 256;
  int64_t max_num_batched_tokens = 8192;
  bool enable_chunked_prefill = true;
  bool enable_prefix_caching = true;
  int64_t max_model_len = 0;  // 0 => the model's max_position_embeddings
  uint64_t seed = 0;          // for requests without their own seed
  int num_threads = 0;        // > 0: SetIntraOpThreads(num_threads)
  // Engine weight dtype (verl rollout.dtype): "" keeps the model's;
  // "float32"/"fp32" or "bfloat16"/"bf16" converts the model's parameters in
  // place at Create (the KV cache follows). fp32 is the fast path on CPU
  // (FusedForward, BLIS); bf16 halves weight/KV memory and runs the
  // model's own forward. Anything else is a config error.
  std::string dtype;
  // fp32 models: run the FusedForward decode path (false: the model's own
  // Forward, e.g. to compare).
  bool fused_forward = true;
  // On the fused fp32 path (single rank): the LM head runs chunk by chunk
  // into the sampler (SampleTokensChunked; every sampling mode, top-p
  // without top-k included), so the [rows, vocab] logits never exist
  // (64 x 151936 fp32 = 39 MB per step). Same tokens and log-probs as false
  // (the full logits, kept to compare).
  bool chunked_lm_head = true;
  // Tensor-parallel group (null or size 1: the whole model on this rank).
  // Create() then keeps only this rank's shard of the (full) model it is
  // given; the group's ranks agree on the KV block count (the smallest of
  // their budgets).
  std::shared_ptr<parallel::Communicator> tp_group;
};

// A multimodal request's images, in the order of their <|image_pad|> runs
// in the prompt: pixel_values [patches, 3*2*14*14] and image_grid_thw
// [images, 3] (the image processor's output). Both undefined: text only.
struct MultiModalInput {
  at::Tensor pixel_values;
  at::Tensor image_grid_thw;
};

struct CompletionOutput {
  int64_t index = 0;  // sample index within the request
  std::vector<int64_t> token_ids;
  std::vector<float> logprobs;  // of each sampled token
  std::string finish_reason;    // "stop" | "length"
  int64_t num_preemptions = 0;
};

struct RequestOutput {
  int64_t request_id = 0;
  std::vector<int64_t> prompt_token_ids;
  std::vector<CompletionOutput> outputs;  // by sample index
};

struct EngineStats {
  int64_t requests_finished = 0;
  int64_t prompt_tokens = 0;  // of finished requests (once per request)
  int64_t generated_tokens = 0;
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t prefill_tokens = 0;  // tokens computed in prefill / recompute
  int64_t decode_tokens = 0;
  double prefix_cache_hit_rate = 0.0;
  // Wall time split. forward_s includes attention_s (paged attention incl.
  // K/V cache writes) and, on the fused fp32 path, gemm_s (projections; the
  // LM head is in logits_s and gemm_s) and elementwise_s (embedding, norms,
  // RoPE, SwiGLU).
  double schedule_s = 0, prepare_s = 0, forward_s = 0, attention_s = 0,
         logits_s = 0, sample_s = 0;
  double gemm_s = 0, elementwise_s = 0;
  double gemm_flops = 0;  // of the fused path's GEMMs incl. the LM head
  int64_t prefix_cache_hit_blocks = 0;  // full blocks reused from the cache
  int64_t vision_encodings = 0;         // requests whose images were encoded
  int64_t images_encoded = 0;
  double vision_s = 0;             // vision tower time (inside forward_s)
  int64_t chunked_head_steps = 0;  // steps whose LM head ran in chunks
};

// Sets LibTorch's intra-op threads and, unless already set, BLIS_NUM_THREADS:
// Debian's BLIS (OpenMP build) takes its thread count from BLIS_NUM_THREADS /
// OMP_NUM_THREADS at its first call and ignores at::set_num_threads, so
// without them every GEMM runs on one thread. Effective only before the
// process's first BLAS call.
void SetIntraOpThreads(int num_threads);

// Parses EngineOptions::dtype ("" => nullopt).
absl::StatusOr<std::optional<c10::ScalarType>> ParseEngineDtype(
    const std::string& dtype);

class LLMEngine {
 public:
  // `model` must stay unchanged in structure; its parameters' dtype is the
  // KV cache dtype.
  static absl::StatusOr<std::unique_ptr<LLMEngine>> Create(
      std::shared_ptr<models::CausalLM> model, const EngineOptions& options);

  // Validates and queues a request; returns its id. An error concerns this
  // request only (empty or too long prompt, token id outside the vocab,
  // invalid sampling parameters).
  // With `mm` images the model must be a vision-language model and the
  // prompt must hold one <|image_pad|> per merged patch of each image
  // (RopeIndex's checks; errors name the image).
  absl::StatusOr<int64_t> AddRequest(std::vector<int64_t> prompt_token_ids,
                                     const SamplingParams& params,
                                     const MultiModalInput& mm = {});
  // Drops a request and frees its blocks.
  void AbortRequest(int64_t request_id);

  // One scheduling step + forward + sampling. Returns finished requests.
  std::vector<RequestOutput> Step();
  // Steps until no request is left; outputs in request-id order.
  std::vector<RequestOutput> RunUntilDone();
  // Batch API: one result per prompt (an error for a bad prompt only).
  // `images`, if not empty, holds each prompt's MultiModalInput (undefined
  // tensors for text prompts); its size must equal prompts.size().
  std::vector<absl::StatusOr<RequestOutput>> Generate(
      const std::vector<std::vector<int64_t>>& prompts,
      const SamplingParams& params,
      const std::vector<MultiModalInput>& images = {});

  bool HasUnfinished() const { return scheduler_->HasUnfinished(); }

  // Called inside Step() for every sampled token as it is appended, before
  // the request's finish is returned (an EOS/stop token included): lets a
  // server stream tokens. Empty: none.
  using TokenCallback =
      std::function<void(int64_t request_id, int64_t sample_index,
                         int64_t token_id, float logprob)>;
  void SetTokenCallback(TokenCallback callback) {
    token_callback_ = std::move(callback);
  }

  // Frees the KV cache; running sequences are preempted (recomputed after
  // WakeUp) and the prefix cache is cleared.
  void Sleep();
  void WakeUp();
  bool sleeping() const { return !kv_cache_->allocated(); }

  // Copies tensors into the parameters of the same HF name (shape must
  // match; dtype is converted). Clears the prefix cache (stale K/V). Under
  // tensor parallelism the tensors are the full HF ones; each rank copies
  // its slice.
  absl::Status UpdateWeights(
      const std::vector<std::pair<std::string, at::Tensor>>& named_tensors);
  // Forgets cached prefix blocks (vLLM reset_prefix_cache).
  void ResetPrefixCache();

  EngineStats stats() const;
  // The whole model's config (also under tensor parallelism).
  const models::ModelConfig& model_config() const { return config_; }
  int tensor_parallel_size() const { return tp_ ? tp_->size() : 1; }
  const EngineOptions& options() const { return options_; }
  int64_t num_kv_blocks() const { return kv_cache_->num_blocks(); }
  int64_t kv_cache_bytes() const { return kv_cache_->AllocatedBytes(); }
  models::CausalLM& model() { return *model_; }  // this rank's shard

 private:
  // Whether the LM head runs in vocabulary chunks inside the sampler
  // (EngineOptions::chunked_lm_head on the fused single-rank path; every
  // sampling mode allows it).
  bool ChunkedHeadApplies() const;

  struct SeqState {
    Sequence seq;
    SeqRng rng;
    std::vector<float> logprobs;
    std::string finish_reason;
  };
  // A multimodal request's images and positions.
  struct MultiModalState {
    at::Tensor pixel_values;  // released once encoded
    std::vector<std::array<int64_t, 3>> grids;
    std::vector<int64_t> positions;  // [3 * prompt_len]: t, h, w rows
    int64_t delta = 0;               // decode position offset (RopeIndex)
    std::vector<int64_t> pad_rank;   // per prompt token: image row or -1
    at::Tensor embeds;               // [pads, H] once encoded
  };
  struct RequestState {
    int64_t id = 0;
    std::shared_ptr<MultiModalState> mm;  // null: text only
    std::shared_ptr<const std::vector<int64_t>> cache_keys;
    SamplingParams params;
    int64_t max_tokens = 0;  // clamped to max_model_len
    uint64_t seed = 0;
    std::vector<int64_t> prompt;
    std::vector<int64_t> seq_ids;
    int64_t num_finished = 0;
  };

  LLMEngine(std::shared_ptr<models::CausalLM> model, models::ModelConfig config,
            EngineOptions options, KvCacheSpec spec, int64_t num_blocks);
  SeqState* NewSequence(RequestState& req, int64_t sample_index);
  // Appends a sampled token; returns true if the sequence finished.
  bool AppendToken(SeqState& s, const RequestState& req, int64_t token,
                   float logprob);
  RequestOutput FinishRequest(RequestState& req);
  // Validates `mm` for `prompt`; returns the request's multimodal state
  // (null for a text request) and sets *cache_keys for image prompts.
  absl::StatusOr<std::shared_ptr<MultiModalState>> MakeMultiModalState(
      const std::vector<int64_t>& prompt, const MultiModalInput& mm,
      std::shared_ptr<const std::vector<int64_t>>* cache_keys) const;
  // Runs the vision tower for `req` if not done yet.
  void EncodeImages(RequestState& req);

  std::shared_ptr<models::CausalLM> model_;
  models::ModelConfig config_;                  // the whole model's
  std::shared_ptr<parallel::Communicator> tp_;  // null: tp = 1
  EngineOptions options_;
  std::vector<int64_t> eos_ids_;
  std::unique_ptr<KvCache> kv_cache_;
  std::unique_ptr<BlockManager> blocks_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<PagedAttention> attention_;
  std::unique_ptr<FusedForward> forward_;
  // Step()'s work lists, kept from step to step (no allocation in a
  // steady decode step).
  SchedulerOutput sched_;
  std::vector<int64_t> ids_, pos_, sample_rows_, logit_row_;
  std::vector<AttentionSequence> meta_;
  std::vector<SeqState*> targets_;
  std::vector<SampleRow> rows_;
  std::vector<float> head_rows_, parent_logits_;
  ChunkedSampler sampler_;
  std::unordered_map<int64_t, std::unique_ptr<SeqState>> seqs_;
  std::unordered_map<int64_t, RequestState> requests_;
  int64_t next_request_id_ = 0;
  int64_t next_seq_id_ = 0;
  EngineStats stats_;
  TokenCallback token_callback_;
};

}  // namespace verl::infer

#endif  // VERL_INFER_ENGINE_H_
