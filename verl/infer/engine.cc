// File: verl/infer/engine.cc
#include "verl/infer/engine.h"

#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/tensor.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "verl/core/status.h"
#include "verl/infer/mla_paged_attention.h"
#include "verl/infer/tensor_parallel.h"
#include "verl/models/vlm/qwen2_vl.h"

namespace verl::infer {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

uint64_t MixSeed(uint64_t a, uint64_t b) {
  uint64_t x = a ^ (b + 0x9e3779b97f4a7c15ULL + (a << 6) + (a >> 2));
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

void SetIntraOpThreads(int num_threads) {
  at::set_num_threads(num_threads);
  setenv("BLIS_NUM_THREADS", std::to_string(num_threads).c_str(),
         /*overwrite=*/0);
}

absl::StatusOr<std::optional<c10::ScalarType>> ParseEngineDtype(
    const std::string& dtype) {
  if (dtype.empty()) return std::optional<c10::ScalarType>();
  if (dtype == "float32" || dtype == "fp32" || dtype == "float") {
    return std::optional<c10::ScalarType>(at::kFloat);
  }
  if (dtype == "bfloat16" || dtype == "bf16") {
    return std::optional<c10::ScalarType>(at::kBFloat16);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "dtype must be float32 or bfloat16 for this engine, got '", dtype, "'"));
}

absl::StatusOr<std::unique_ptr<LLMEngine>> LLMEngine::Create(
    std::shared_ptr<models::CausalLM> model, const EngineOptions& in) {
  if (model == nullptr) return absl::InvalidArgumentError("model is null");
  const models::ModelConfig& cfg = model->config();
  if (cfg.is_value_model) {
    return absl::InvalidArgumentError("cannot generate with a value model");
  }
  EngineOptions opt = in;
  if (opt.block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size must be > 0, got ", opt.block_size));
  }
  if (opt.max_model_len <= 0) opt.max_model_len = cfg.max_position_embeddings;
  if (opt.max_model_len > cfg.max_position_embeddings) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_model_len ", opt.max_model_len,
                     " exceeds the model's max_position_embeddings ",
                     cfg.max_position_embeddings));
  }
  if (opt.max_num_seqs <= 0 || opt.max_num_batched_tokens <= 0) {
    return absl::InvalidArgumentError(
        "max_num_seqs and max_num_batched_tokens must be > 0");
  }
  if (!opt.enable_chunked_prefill &&
      opt.max_num_batched_tokens < opt.max_model_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_num_batched_tokens (", opt.max_num_batched_tokens,
                     ") must be >= max_model_len (", opt.max_model_len,
                     ") when enable_chunked_prefill is false"));
  }
  if (opt.num_threads > 0) SetIntraOpThreads(opt.num_threads);
  VERL_ASSIGN_OR_RETURN(std::optional<c10::ScalarType> dtype,
                        ParseEngineDtype(opt.dtype));
  const models::ModelConfig full_config = cfg;
  const int tp = opt.tp_group != nullptr ? opt.tp_group->size() : 1;
  if (tp > 1) {
    VERL_RETURN_IF_ERROR(ValidateTensorParallel(full_config, tp));
    if (!model->parameters().front().device().is_cpu()) {
      return absl::InvalidArgumentError(absl::StrCat(
          kRolloutTpKey, "=", tp, " needs the engine's model on CPU (Gloo)"));
    }
    // Only this rank's shard is kept; `model` (the whole) is dropped here.
    model = ShardModel(*model, opt.tp_group->rank(), tp);
    InstallRowParallelHooks(*model, opt.tp_group);
  } else {
    opt.tp_group.reset();
  }
  if (dtype.has_value() &&
      model->parameters().front().scalar_type() != *dtype) {
    model->to(*dtype);
  }
  const models::ModelConfig& local = model->config();

  KvCacheSpec spec;
  spec.num_layers = local.num_hidden_layers;
  spec.num_kv_heads = local.num_key_value_heads;
  spec.head_dim = local.HeadDim();
  spec.block_size = opt.block_size;
  spec.dtype = model->parameters().front().scalar_type();
  if (local.IsMla()) {  // one latent + rope key per token and layer
    spec.num_kv_heads = 1;
    spec.head_dim = local.kv_lora_rank + local.qk_rope_head_dim;
    spec.latent = true;
  }

  const int64_t blocks_per_seq =
      (opt.max_model_len + opt.block_size - 1) / opt.block_size;
  int64_t num_blocks = opt.num_kv_blocks;
  if (num_blocks <= 0) {
    int64_t budget = opt.kv_cache_bytes;
    if (budget <= 0) {
      if (!(opt.gpu_memory_utilization > 0 &&
            opt.gpu_memory_utilization <= 1)) {
        return absl::InvalidArgumentError(
            absl::StrCat("gpu_memory_utilization must be in (0, 1], got ",
                         opt.gpu_memory_utilization));
      }
      VERL_ASSIGN_OR_RETURN(int64_t avail, MemAvailableBytes());
      budget = static_cast<int64_t>(opt.gpu_memory_utilization *
                                    static_cast<double>(avail));
    }
    num_blocks = NumBlocksForBudget(spec, budget);
    // More than every seat at full length (+1 for copy-on-write) is waste.
    num_blocks = std::min(num_blocks, opt.max_num_seqs * blocks_per_seq + 1);
  }
  if (opt.tp_group != nullptr) {
    // Same block count on every rank: same scheduling, same preemptions.
    at::Tensor n = at::tensor({num_blocks}, at::kLong);
    VERL_RETURN_IF_ERROR(opt.tp_group->AllReduce(n, parallel::ReduceOp::kMin));
    num_blocks = n.item<int64_t>();
  }
  if (num_blocks < blocks_per_seq + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache too small: ", num_blocks, " blocks of ",
                     opt.block_size, " tokens (", spec.BytesPerBlock(),
                     " bytes each); one sequence of "
                     "max_model_len ",
                     opt.max_model_len, " needs ", blocks_per_seq + 1));
  }
  return std::unique_ptr<LLMEngine>(
      new LLMEngine(std::move(model), full_config, opt, spec, num_blocks));
}

LLMEngine::LLMEngine(std::shared_ptr<models::CausalLM> model,
                     models::ModelConfig config, EngineOptions options,
                     KvCacheSpec spec, int64_t num_blocks)
    : model_(std::move(model)),
      config_(std::move(config)),
      tp_(options.tp_group),
      options_(options) {
  eos_ids_ = config_.eos_token_ids;
  kv_cache_ = std::make_unique<KvCache>(spec, num_blocks);
  kv_cache_->Allocate();
  blocks_ = std::make_unique<BlockManager>(num_blocks, spec.block_size,
                                           options_.enable_prefix_caching);
  SchedulerOptions so;
  so.max_num_seqs = options_.max_num_seqs;
  so.max_num_batched_tokens = options_.max_num_batched_tokens;
  so.enable_chunked_prefill = options_.enable_chunked_prefill;
  scheduler_ = std::make_unique<Scheduler>(so, blocks_.get());
  if (spec.latent) {
    attention_ = std::make_unique<MlaPagedAttention>(kv_cache_.get());
  } else {
    attention_ = std::make_unique<PagedAttention>(kv_cache_.get(),
                                                  model_->LayerWindows());
  }
  attention_->Reserve(
      options_.max_num_seqs,
      (options_.max_model_len + spec.block_size - 1) / spec.block_size);
  forward_ =
      std::make_unique<FusedForward>(model_.get(), options_.max_model_len);
  if (tp_ != nullptr) forward_->set_tensor_parallel(tp_);
  // The fused path's weight copies are made here, with the model load, not
  // in the first request's prefill.
  if (options_.fused_forward) forward_->Prepack();
  model_->eval();
}

absl::StatusOr<std::shared_ptr<LLMEngine::MultiModalState>>
LLMEngine::MakeMultiModalState(
    const std::vector<int64_t>& prompt, const MultiModalInput& mm,
    std::shared_ptr<const std::vector<int64_t>>* cache_keys) const {
  const bool given = mm.image_grid_thw.defined() || mm.pixel_values.defined();
  auto* vlm =
      dynamic_cast<models::vlm::Qwen2VLForConditionalGeneration*>(model_.get());
  if (vlm == nullptr) {
    if (given) {
      return absl::InvalidArgumentError(
          "images given but the model is not a vision-language model");
    }
    return std::shared_ptr<MultiModalState>();
  }
  const models::vlm::VlmConfig& vc = vlm->vlm_config();
  const int64_t pads =
      std::count(prompt.begin(), prompt.end(), vc.image_token_id);
  if (!mm.image_grid_thw.defined() || mm.image_grid_thw.numel() == 0) {
    if (pads > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prompt has ", pads, " <|image_pad|> tokens but no images"));
    }
    return std::shared_ptr<MultiModalState>();
  }
  if (mm.image_grid_thw.dim() != 2 || mm.image_grid_thw.size(1) != 3) {
    return absl::InvalidArgumentError("image_grid_thw must be [images, 3]");
  }
  auto state = std::make_shared<MultiModalState>();
  const at::Tensor thw = mm.image_grid_thw.to(at::kLong).cpu().contiguous();
  const int64_t* g = thw.data_ptr<int64_t>();
  std::vector<int64_t> first_patch;
  int64_t patches = 0;
  for (int64_t i = 0; i < thw.size(0); ++i) {
    if (g[3 * i] <= 0 || g[3 * i + 1] <= 0 || g[3 * i + 2] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("image ", i, ": image_grid_thw must be positive"));
    }
    state->grids.push_back({g[3 * i], g[3 * i + 1], g[3 * i + 2]});
    first_patch.push_back(patches);
    patches += g[3 * i] * g[3 * i + 1] * g[3 * i + 2];
  }
  if (!mm.pixel_values.defined() || mm.pixel_values.dim() != 2 ||
      mm.pixel_values.size(0) != patches ||
      mm.pixel_values.size(1) != vc.vision.PatchDim()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pixel_values must be [", patches, ", ",
                     vc.vision.PatchDim(), "] for image_grid_thw"));
  }
  VERL_ASSIGN_OR_RETURN(models::vlm::RopeIndexResult index,
                        models::vlm::RopeIndex(prompt, state->grids, vc));
  const at::Tensor pos = index.position_ids.to(at::kLong).cpu().contiguous();
  state->positions.assign(pos.data_ptr<int64_t>(),
                          pos.data_ptr<int64_t>() + pos.numel());
  state->delta = index.delta;
  const at::Tensor pixels = mm.pixel_values.detach().cpu().contiguous();
  state->pixel_values = pixels;

  // Cache keys: the j-th pad of image i is named by a hash of the image's
  // pixel rows and grid, negative so it never equals a token id.
  auto keys = std::make_shared<std::vector<int64_t>>(prompt);
  const int64_t row_bytes = pixels.size(1) * pixels.element_size();
  const char* base = static_cast<const char*>(pixels.data_ptr());
  state->pad_rank.assign(prompt.size(), -1);
  int64_t rank = 0, image = 0, left_in_image = 0;
  uint64_t image_hash = 0;
  for (size_t t = 0; t < prompt.size(); ++t) {
    if (prompt[t] != vc.image_token_id) continue;
    if (left_in_image == 0) {
      const auto& gi = state->grids[image];
      const int64_t n = gi[0] * gi[1] * gi[2];
      image_hash =
          absl::HashOf(absl::string_view(base + first_patch[image] * row_bytes,
                                         n * row_bytes),
                       gi[0], gi[1], gi[2]);
      left_in_image = n / vc.vision.MergeUnit();
      ++image;
    }
    const uint64_t h = absl::HashOf(image_hash, rank);
    (*keys)[t] = -1 - static_cast<int64_t>(h >> 1);
    state->pad_rank[t] = rank++;
    --left_in_image;
  }
  *cache_keys = std::move(keys);
  return state;
}

void LLMEngine::EncodeImages(RequestState& req) {
  MultiModalState& mm = *req.mm;
  if (mm.embeds.defined()) return;
  const auto t0 = Clock::now();
  auto& vlm =
      static_cast<models::vlm::Qwen2VLForConditionalGeneration&>(*model_);
  const at::Tensor& w = model_->model->embed_tokens->weight;
  mm.embeds = vlm.visual->Forward(
      mm.pixel_values.to(w.device(), w.scalar_type()), mm.grids);
  mm.pixel_values = at::Tensor();  // encoded once per request
  ++stats_.vision_encodings;
  stats_.images_encoded += static_cast<int64_t>(mm.grids.size());
  stats_.vision_s += SecondsSince(t0);
}

absl::StatusOr<int64_t> LLMEngine::AddRequest(std::vector<int64_t> prompt,
                                              const SamplingParams& params,
                                              const MultiModalInput& mm) {
  if (prompt.empty()) return absl::InvalidArgumentError("empty prompt");
  const int64_t len = static_cast<int64_t>(prompt.size());
  if (len >= options_.max_model_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt of ", len,
                     " tokens leaves no room to generate within "
                     "max_model_len ",
                     options_.max_model_len));
  }
  const int64_t vocab = model_->config().vocab_size;
  for (int64_t i = 0; i < len; ++i) {
    if (prompt[i] < 0 || prompt[i] >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token ", i, " = ", prompt[i],
                       " is outside the vocabulary [0, ", vocab, ")"));
    }
  }
  VERL_RETURN_IF_ERROR(ValidateSamplingParams(params));
  if (params.n > options_.max_num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "n = ", params.n, " exceeds max_num_seqs ", options_.max_num_seqs));
  }
  std::shared_ptr<const std::vector<int64_t>> cache_keys;
  VERL_ASSIGN_OR_RETURN(std::shared_ptr<MultiModalState> mm_state,
                        MakeMultiModalState(prompt, mm, &cache_keys));
  const int64_t id = next_request_id_++;
  RequestState& req = requests_[id];
  req.id = id;
  req.mm = std::move(mm_state);
  req.cache_keys = std::move(cache_keys);
  req.params = params;
  req.max_tokens = std::min(params.max_tokens, options_.max_model_len - len);
  req.seed =
      params.seed.has_value() ? *params.seed : MixSeed(options_.seed, id);
  req.prompt = std::move(prompt);
  SeqState* s = NewSequence(req, 0);
  s->seq.fork_n = static_cast<int>(params.n);
  scheduler_->Add(&s->seq);
  return id;
}

LLMEngine::SeqState* LLMEngine::NewSequence(RequestState& req,
                                            int64_t sample_index) {
  auto state = std::make_unique<SeqState>();
  state->seq.seq_id = next_seq_id_++;
  state->seq.request_id = req.id;
  state->seq.sample_index = static_cast<int>(sample_index);
  state->seq.tokens = req.prompt;
  state->seq.prompt_len = static_cast<int64_t>(req.prompt.size());
  state->seq.cache_keys = req.cache_keys;
  state->rng = MakeSequenceRng(req.seed, sample_index);
  SeqState* raw = state.get();
  req.seq_ids.push_back(raw->seq.seq_id);
  seqs_[raw->seq.seq_id] = std::move(state);
  return raw;
}

void LLMEngine::AbortRequest(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  scheduler_->Abort(request_id);
  for (int64_t sid : it->second.seq_ids) seqs_.erase(sid);
  requests_.erase(it);
}

bool LLMEngine::AppendToken(SeqState& s, const RequestState& req, int64_t token,
                            float logprob) {
  if (s.seq.num_output_tokens() == 0) {
    // Its first token: room for every token it may reach, so that decode
    // steps append without allocating. Reserved here, not at AddRequest,
    // so only sequences that run hold it (at most max_num_seqs of them,
    // plus preempted ones), not a server's whole queue.
    const int64_t len = s.seq.prompt_len + req.max_tokens;
    const int64_t blocks =
        (len + options_.block_size - 1) / options_.block_size;
    s.seq.tokens.reserve(len);
    s.seq.block_table.reserve(blocks);
    s.seq.block_hashes.reserve(blocks);
    s.logprobs.reserve(req.max_tokens);
  }
  s.seq.tokens.push_back(token);
  s.logprobs.push_back(logprob);
  const SamplingParams& p = req.params;
  const bool is_eos =
      !p.ignore_eos &&
      std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end();
  const bool is_stop =
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
      p.stop_token_ids.end();
  if (is_eos || is_stop) {
    s.finish_reason = "stop";
  } else if (s.seq.num_output_tokens() >= req.max_tokens) {
    s.finish_reason = "length";
  } else {
    return false;
  }
  return true;
}

RequestOutput LLMEngine::FinishRequest(RequestState& req) {
  RequestOutput out;
  out.request_id = req.id;
  out.prompt_token_ids = req.prompt;
  for (int64_t sid : req.seq_ids) {
    SeqState& s = *seqs_.at(sid);
    CompletionOutput c;
    c.index = s.seq.sample_index;
    c.token_ids.assign(s.seq.tokens.begin() + s.seq.prompt_len,
                       s.seq.tokens.end());
    c.logprobs = std::move(s.logprobs);
    c.finish_reason = s.finish_reason;
    c.num_preemptions = s.seq.num_preemptions;
    stats_.generated_tokens += static_cast<int64_t>(c.token_ids.size());
    out.outputs.push_back(std::move(c));
    seqs_.erase(sid);
  }
  std::sort(out.outputs.begin(), out.outputs.end(),
            [](const auto& a, const auto& b) { return a.index < b.index; });
  ++stats_.requests_finished;
  stats_.prompt_tokens += static_cast<int64_t>(req.prompt.size());
  return out;
}

bool LLMEngine::ChunkedHeadApplies() const {
  // Every row (greedy, top-k, top-p, unfiltered) samples from logits in
  // chunks (SampleTokensChunked), so only the forward path decides (and
  // the head: FusedForward::HeadVocab).
  return options_.chunked_lm_head && options_.fused_forward && tp_ == nullptr &&
         forward_->Applies();
}

// A decode step in which no sequence is admitted, forked, preempted or
// finished allocates nothing on the fused fp32 path (dense model, tp = 1,
// no images): every container below is a member that keeps its capacity,
// the forward and the LM head write into FusedForward's buffers, and the
// sampler into its workspace (decode_alloc_test counts).
std::vector<RequestOutput> LLMEngine::Step() {
  CHECK(!sleeping()) << "LLMEngine::Step() while asleep; call WakeUp()";
  std::vector<RequestOutput> finished;
  auto t0 = Clock::now();
  scheduler_->Schedule(&sched_);
  const SchedulerOutput& sched = sched_;
  stats_.schedule_s += SecondsSince(t0);
  if (sched.scheduled.empty()) {
    CHECK(!scheduler_->HasUnfinished())
        << "scheduler made no progress with " << scheduler_->num_waiting()
        << " waiting and " << scheduler_->num_running() << " running";
    return finished;
  }
  ++stats_.steps;

  // Packed inputs and attention layout.
  t0 = Clock::now();
  kv_cache_->CopyBlocks(sched.copies);
  const int64_t total = sched.num_batched_tokens;
  ids_.resize(total);
  pos_.resize(total);
  sample_rows_.clear();
  meta_.clear();
  // M-RoPE rows (t, h, w) per token, filled when a multimodal request is
  // scheduled; a step that computes image tokens runs the embeddings path.
  std::vector<int64_t> pos_h, pos_w;
  struct ImageRows {
    RequestState* req;
    std::vector<int64_t> rows, ranks;
  };
  std::vector<ImageRows> image_rows;
  int64_t row = 0;
  for (const ScheduledSequence& s : sched.scheduled) {
    const Sequence& q = *s.seq;
    RequestState& req = requests_.at(q.request_id);
    if (req.mm != nullptr && pos_h.empty()) {
      pos_h.assign(pos_.begin(), pos_.end());
      pos_w.assign(pos_.begin(), pos_.end());
    }
    ImageRows image{&req, {}, {}};
    for (int64_t t = 0; t < s.num_new_tokens; ++t) {
      const int64_t p = q.num_computed + t;
      ids_[row + t] = q.tokens[p];
      pos_[row + t] = p;
      if (!pos_h.empty()) pos_h[row + t] = pos_w[row + t] = p;
      if (req.mm == nullptr) continue;
      const MultiModalState& mm = *req.mm;
      if (p < q.prompt_len) {
        pos_[row + t] = mm.positions[p];
        pos_h[row + t] = mm.positions[q.prompt_len + p];
        pos_w[row + t] = mm.positions[2 * q.prompt_len + p];
        if (mm.pad_rank[p] >= 0) {
          image.rows.push_back(row + t);
          image.ranks.push_back(mm.pad_rank[p]);
        }
      } else {
        pos_[row + t] = pos_h[row + t] = pos_w[row + t] = p + mm.delta;
      }
    }
    if (!image.rows.empty()) image_rows.push_back(std::move(image));
    meta_.push_back({row, s.num_new_tokens, q.num_computed + s.num_new_tokens,
                     &q.block_table});
    row += s.num_new_tokens;
    if (s.sample) sample_rows_.push_back(row - 1);
  }
  attention_->Prepare(meta_, total);
  stats_.prepare_s += SecondsSince(t0);

  // One forward over every scheduled token; then either the hidden rows to
  // sample from (the LM head runs in chunks inside the sampler) or their
  // logits. The fused fp32 path works on raw rows (no tensors).
  const int64_t num_sample = static_cast<int64_t>(sample_rows_.size());
  const bool raw =
      image_rows.empty() && options_.fused_forward && forward_->Applies();
  const int64_t head_vocab = ChunkedHeadApplies() ? forward_->HeadVocab() : 0;
  RowsView head_x;  // the chunked head's input rows
  at::Tensor hidden, logits;
  {
    c10::InferenceMode guard;
    t0 = Clock::now();
    const double attn0 = attention_->attend_seconds();
    if (raw) {
      const RowsView h =
          forward_->ForwardRows(ids_.data(), pos_.data(), total, *attention_);
      head_x = h;
      if (num_sample != total) {  // prefill chunks: only their last rows
        head_rows_.resize(num_sample * h.cols);
        head_x = {head_rows_.data(), num_sample, h.cols, h.cols};
        for (int64_t i = 0; i < num_sample; ++i) {
          std::memcpy(head_x.row(i), h.row(sample_rows_[i]),
                      h.cols * sizeof(float));
        }
      }
    } else if (!image_rows.empty()) {
      // Token embeddings with each request's image embeddings spliced at
      // its pad rows, and M-RoPE positions [3, T].
      at::Tensor embeds =
          model_->model->embed_tokens->Forward(at::tensor(ids_, at::kLong));
      for (ImageRows& image : image_rows) {
        EncodeImages(*image.req);
        embeds.index_copy_(
            0, at::tensor(image.rows, at::kLong),
            image.req->mm->embeds
                .index_select(0, at::tensor(image.ranks, at::kLong))
                .to(embeds.scalar_type()));
      }
      at::Tensor pos3 =
          at::cat({at::tensor(pos_, at::kLong), at::tensor(pos_h, at::kLong),
                   at::tensor(pos_w, at::kLong)})
              .view({3, total});
      hidden = model_->ForwardEmbeds(embeds, pos3, *attention_);
    } else {
      // Text tokens only: the three M-RoPE rows are equal, so 1-D RoPE.
      const at::Tensor ids_t = at::tensor(ids_, at::kLong);
      const at::Tensor pos_t = at::tensor(pos_, at::kLong);
      hidden = options_.fused_forward
                   ? forward_->Forward(ids_t, pos_t, *attention_)
                   : model_->Forward(ids_t, pos_t, *attention_);
    }
    stats_.forward_s += SecondsSince(t0);
    stats_.attention_s += attention_->attend_seconds() - attn0;
    t0 = Clock::now();
    if (num_sample > 0) {
      if (raw) {
        if (head_vocab == 0) {
          logits = forward_->Logits(at::from_blob(
              head_x.data, {head_x.rows, head_x.cols}, at::kFloat));
        }
      } else {
        if (num_sample != total) {
          hidden = hidden.index_select(0, at::tensor(sample_rows_, at::kLong));
        }
        if (head_vocab > 0) {
          hidden = hidden.to(at::kFloat).contiguous();
          head_x = {hidden.data_ptr<float>(), hidden.size(0), hidden.size(1),
                    hidden.size(1)};
        } else {
          // (Under tensor parallelism FusedForward::Logits gathers the
          // vocab shards on either forward path.)
          logits = options_.fused_forward || tp_ != nullptr
                       ? forward_->Logits(hidden)
                       : model_->Logits(hidden);
        }
      }
    }
    stats_.logits_s += SecondsSince(t0);
  }
  scheduler_->OnStepDone(sched);

  // Fork parents whose prompt is done, then sample every row.
  t0 = Clock::now();
  targets_.clear();
  logit_row_.clear();
  rows_.clear();
  int64_t r = 0;
  for (const ScheduledSequence& s : sched.scheduled) {
    if (!s.sample) continue;
    SeqState* parent = seqs_.at(s.seq->seq_id).get();
    RequestState& req = requests_.at(parent->seq.request_id);
    auto add_target = [&](SeqState* g) {
      targets_.push_back(g);
      logit_row_.push_back(r);
      rows_.push_back({&req.params, &g->rng, &g->seq.tokens});
    };
    add_target(parent);
    if (parent->seq.fork_n > 1) {
      Sequence* last = &parent->seq;
      for (int64_t i = 1; i < parent->seq.fork_n; ++i) {
        SeqState* child = NewSequence(req, i);
        child->seq.num_computed = parent->seq.num_computed;
        blocks_->Fork(parent->seq, child->seq);
        scheduler_->AddForked(last, &child->seq);
        last = &child->seq;
        add_target(child);
      }
      parent->seq.fork_n = 1;
    }
    ++r;
  }
  if (!targets_.empty()) {
    absl::Span<const SampledToken> sampled;
    if (head_vocab > 0) {
      // LM head in vocabulary chunks feeding the sampler, over the same
      // hidden rows as the full path (one per sampled parent; a GEMM's
      // values can depend on its row count), copied out to forked samples.
      c10::InferenceMode guard;
      const bool forked = static_cast<int64_t>(targets_.size()) != head_x.rows;
      double head_s = 0;
      sampled = sampler_.Sample(
          head_vocab,
          [&](int64_t v0, int64_t v1, float* out) {
            const auto c0 = Clock::now();
            const int64_t n = v1 - v0;
            if (!forked) {
              forward_->HeadChunk(head_x, v0, v1, out);
            } else {
              parent_logits_.resize(head_x.rows * n);
              forward_->HeadChunk(head_x, v0, v1, parent_logits_.data());
              for (size_t i = 0; i < logit_row_.size(); ++i) {
                std::copy_n(parent_logits_.data() + logit_row_[i] * n, n,
                            out + i * n);
              }
            }
            head_s += SecondsSince(c0);
          },
          rows_);
      ++stats_.chunked_head_steps;
      stats_.logits_s += head_s;
      stats_.sample_s -= head_s;
    } else {
      at::Tensor sample_logits = logits;
      if (static_cast<int64_t>(targets_.size()) != logits.size(0)) {
        sample_logits =
            logits.index_select(0, at::tensor(logit_row_, at::kLong));
      }
      sample_logits = sample_logits.to(at::kFloat).contiguous();
      sampled = sampler_.SampleLogits(sample_logits.data_ptr<float>(),
                                      sample_logits.size(1), rows_);
    }
    for (size_t i = 0; i < targets_.size(); ++i) {
      SeqState& s = *targets_[i];
      const SampledToken& tok = sampled[i];
      RequestState& req = requests_.at(s.seq.request_id);
      if (token_callback_) {
        token_callback_(req.id, s.seq.sample_index, tok.token, tok.logprob);
      }
      if (!AppendToken(s, req, tok.token, tok.logprob)) continue;
      scheduler_->Finish(&s.seq);
      if (++req.num_finished == req.params.n) {
        finished.push_back(FinishRequest(req));
        requests_.erase(req.id);
      }
    }
  }
  stats_.sample_s += SecondsSince(t0);
  return finished;
}

std::vector<RequestOutput> LLMEngine::RunUntilDone() {
  std::vector<RequestOutput> all;
  while (HasUnfinished()) {
    for (RequestOutput& o : Step()) all.push_back(std::move(o));
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.request_id < b.request_id;
  });
  return all;
}

std::vector<absl::StatusOr<RequestOutput>> LLMEngine::Generate(
    const std::vector<std::vector<int64_t>>& prompts,
    const SamplingParams& params, const std::vector<MultiModalInput>& images) {
  std::vector<absl::StatusOr<RequestOutput>> results(prompts.size());
  if (!images.empty() && images.size() != prompts.size()) {
    for (auto& r : results) {
      r = absl::InvalidArgumentError(absl::StrCat(
          images.size(), " image inputs for ", prompts.size(), " prompts"));
    }
    return results;
  }
  std::unordered_map<int64_t, size_t> slot;
  for (size_t i = 0; i < prompts.size(); ++i) {
    absl::StatusOr<int64_t> id = AddRequest(
        prompts[i], params, images.empty() ? MultiModalInput() : images[i]);
    if (!id.ok()) {
      results[i] = verl::Annotate(id.status(), absl::StrCat("prompt ", i));
    } else {
      slot[*id] = i;
    }
  }
  while (HasUnfinished()) {
    for (RequestOutput& o : Step()) {
      auto it = slot.find(o.request_id);
      if (it != slot.end()) results[it->second] = std::move(o);
    }
  }
  return results;
}

void LLMEngine::Sleep() {
  if (sleeping()) return;
  scheduler_->PreemptAll();
  blocks_->mutable_cache().Reset();
  kv_cache_->Release();
}

void LLMEngine::WakeUp() { kv_cache_->Allocate(); }

void LLMEngine::ResetPrefixCache() { blocks_->mutable_cache().Reset(); }

absl::Status LLMEngine::UpdateWeights(
    const std::vector<std::pair<std::string, at::Tensor>>& named_tensors) {
  auto params = model_->named_parameters(/*recurse=*/true);
  // Under tensor parallelism: this rank's slice of each full tensor.
  std::vector<at::Tensor> slices;
  slices.reserve(named_tensors.size());
  for (const auto& [name, t] : named_tensors) {
    slices.push_back(tp_ == nullptr
                         ? t
                         : ShardOf(name, t, config_, tp_->rank(), tp_->size()));
  }
  // Check everything first so a bad tensor leaves the model untouched.
  for (size_t i = 0; i < named_tensors.size(); ++i) {
    const std::string& name = named_tensors[i].first;
    const at::Tensor& t = slices[i];
    if (!t.defined()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "UpdateWeights: '", name, "' has shape ",
          c10::str(named_tensors[i].second.sizes()),
          ", not the full tensor this tensor-parallel engine slices"));
    }
    const at::Tensor* p = params.find(name);
    if (p == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("UpdateWeights: no parameter named '", name, "'"));
    }
    if (p->sizes() != t.sizes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "UpdateWeights: '", name, "' has shape ", c10::str(t.sizes()),
          ", parameter has ", c10::str(p->sizes())));
    }
  }
  {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < named_tensors.size(); ++i) {
      params[named_tensors[i].first].copy_(slices[i]);
    }
  }
  ResetPrefixCache();
  return absl::OkStatus();
}

EngineStats LLMEngine::stats() const {
  EngineStats s = stats_;
  const SchedulerStats& ss = scheduler_->stats();
  s.preemptions = ss.preemptions;
  s.prefill_tokens = ss.prefill_tokens;
  s.decode_tokens = ss.decode_tokens;
  s.prefix_cache_hit_rate = blocks_->cache().stats().HitRate();
  s.prefix_cache_hit_blocks = blocks_->cache().stats().hit_blocks;
  s.gemm_s = forward_->stats().gemm_s;
  s.gemm_flops = forward_->stats().gemm_flops;
  s.elementwise_s = forward_->stats().other_s;
  return s;
}

}  // namespace verl::infer
