// File: tools/bench_rollout.cc
//
// Rollout throughput on a GRPO-shaped workload (default: 32 prompts x n=8,
// prompt lengths 32-256, responses up to 256 tokens, qwen2-30m preset),
// comparing in one run:
//   engine     LLMEngine: paged KV, continuous batching, prefix sharing
//   no_share   the same engine, each sample its own request, no prefix cache
//   static     HF-generate-style static batching: a contiguous, padded KV
//              cache per batch that decodes until the batch's longest
//              response ends (fed the engine's tokens so the work matches)
// then decode throughput vs batch size with its FLOP rate against the
// measured GEMM peak of this process, and where the engine's time goes.
// The last line is a one-line summary of the measured ratios.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "verl/core/malloc_tuning.h"
#include "verl/infer/cpu_isa.h"
#include "verl/infer/engine.h"
#include "verl/infer/sampling_params.h"
#include "verl/models/attention.h"
#include "verl/models/decoder.h"
#include "verl/models/presets.h"
#include "verl/profiler/gemm_peak.h"

ABSL_FLAG(std::string, preset, "qwen2-30m", "model preset");
ABSL_FLAG(int, threads, 2, "LibTorch intra-op threads");
ABSL_FLAG(int, num_prompts, 32, "prompts");
ABSL_FLAG(int, n, 8, "samples per prompt");
ABSL_FLAG(int, min_prompt, 32, "shortest prompt");
ABSL_FLAG(int, max_prompt, 256, "longest prompt");
ABSL_FLAG(int, max_response, 256, "max response tokens");
ABSL_FLAG(int, stop_ids, 128,
          "number of stop token ids (sets the mean response length: a "
          "random model stops with probability ~stop_ids/vocab per token)");
ABSL_FLAG(int, static_batch, 64, "sequences per static batch");
ABSL_FLAG(std::string, decode_batches, "1,8,32,64,128",
          "batch sizes for the decode sweep");
ABSL_FLAG(int, decode_steps, 32, "decode steps timed per window");
ABSL_FLAG(int, decode_repeats, 3,
          "timed windows per batch size (each next to its own GEMM peak)");
ABSL_FLAG(int, vocab, 0, "vocabulary size (0: the preset's)");
ABSL_FLAG(int, num_kv_heads, 0, "key/value heads (0: the preset's)");
ABSL_FLAG(int, decode_prompt, 64, "prompt tokens of each decode-sweep request");
ABSL_FLAG(bool, compare_full_head, false,
          "also decode with the LM head's full [batch, vocab] logits "
          "(chunked_lm_head=false) before each fused point, same run");
ABSL_FLAG(double, decode_temperature, 0.0,
          "decode sweep sampling temperature (0: greedy; 1: verl's rollout "
          "default, an unfiltered draw)");
ABSL_FLAG(double, decode_top_p, 1.0,
          "decode sweep top-p (1: off; below 1 with a temperature: the "
          "nucleus, without top-k)");
ABSL_FLAG(bool, workload, true,
          "run the GRPO workload comparison (engine / no_share / static)");
ABSL_FLAG(bool, compare_unfused, true,
          "also time the model's own Forward (no FusedForward) at batch >= 64");

namespace verl {
namespace {

using Clock = std::chrono::steady_clock;
using infer::EngineOptions;
using infer::LLMEngine;
using infer::SamplingParams;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The 1/5/15-minute load averages (the machine is shared).
std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return absl::StrCat(a, " ", b, " ", c);
}

// Best-of-3 fp32 GEMM rate (GFLOP/s) of an m x k by k x n matmul.
double GemmGflops(int64_t m, int64_t k, int64_t n) {
  return profiler::MeasureGemmFlops(m, k, n) / 1e9;
}

// Matmul FLOPs per token (all projections + LM head) and attention FLOPs
// per token per context position.
struct ModelFlops {
  double matmul = 0, attention_per_ctx = 0;
};
ModelFlops CountFlops(const models::ModelConfig& c) {
  const double h = c.hidden_size, d = c.HeadDim();
  const double q = c.num_attention_heads * d, kv = c.num_key_value_heads * d;
  const double per_layer =
      h * q + 2 * h * kv + q * h + 3 * h * c.intermediate_size;
  ModelFlops f;
  f.matmul = 2 * (c.num_hidden_layers * per_layer + h * c.vocab_size);
  f.attention_per_ctx = 4.0 * c.num_hidden_layers * q;
  return f;
}

// ---- Static batching baseline (HF generate) --------------------------------

// Contiguous padded KV cache for a batch of B rows: [B, max_len, kv, d] per
// layer; every forward appends `s` tokens to every row.
class PaddedBatchCache : public models::AttentionBackend {
 public:
  PaddedBatchCache(const models::ModelConfig& c, int64_t batch, int64_t max_len,
                   at::Tensor pad_mask)
      : batch_(batch), pad_(std::move(pad_mask)) {
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      k_.push_back(
          at::zeros({batch, max_len, c.num_key_value_heads, c.HeadDim()}));
      v_.push_back(at::zeros_like(k_.back()));
    }
  }
  void Advance(int64_t s) { len_ += s; }

  at::Tensor Attend(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                    const at::Tensor& v) override {
    const int64_t s = q.size(0) / batch_, h = q.size(1), d = q.size(2);
    const int64_t kvh = k.size(1), g = h / kvh, total = len_ + s;
    k_[layer].narrow(1, len_, s).copy_(k.view({batch_, s, kvh, d}));
    v_[layer].narrow(1, len_, s).copy_(v.view({batch_, s, kvh, d}));
    at::Tensor kc = k_[layer].narrow(1, 0, total);
    at::Tensor vc = v_[layer].narrow(1, 0, total);
    at::Tensor q5 = q.view({batch_, s, kvh, g, d}).permute({0, 2, 3, 1, 4});
    at::Tensor scores = at::matmul(q5, kc.permute({0, 2, 3, 1}).unsqueeze(2)) /
                        std::sqrt(static_cast<double>(d));  // [B, kv, g, s, L]
    at::Tensor qi = at::arange(len_, total).unsqueeze(1);
    at::Tensor kj = at::arange(0, total).unsqueeze(0);
    at::Tensor mask = (kj > qi).unsqueeze(0) |
                      pad_.narrow(1, 0, total).unsqueeze(1);  // [B, s, L]
    scores = scores.masked_fill(mask.view({batch_, 1, 1, s, total}), -1e9);
    at::Tensor out = at::matmul(at::softmax(scores, -1),
                                vc.permute({0, 2, 1, 3}).unsqueeze(2));
    return out.permute({0, 3, 1, 2, 4}).reshape({batch_ * s, h, d});
  }

 private:
  int64_t batch_, len_ = 0;
  at::Tensor pad_;  // [B, max_len] true at left-padding positions
  std::vector<at::Tensor> k_, v_;
};

// Runs rows [prompt_i, response_i] in static batches; responses are fed
// (teacher forcing) so the work equals the engine's, while each step still
// pays for full-batch logits and sampling. Returns seconds.
double RunStatic(models::CausalLM& model,
                 const std::vector<std::vector<int64_t>>& prompts,
                 const std::vector<std::vector<int64_t>>& responses,
                 int64_t batch_size) {
  c10::InferenceMode guard;
  const models::ModelConfig& c = model.config();
  auto t0 = Clock::now();
  for (size_t b0 = 0; b0 < prompts.size(); b0 += batch_size) {
    const int64_t b1 = std::min<int64_t>(prompts.size(), b0 + batch_size);
    const int64_t rows = b1 - b0;
    int64_t lp = 0, lr = 0;
    for (int64_t r = b0; r < b1; ++r) {
      lp = std::max<int64_t>(lp, prompts[r].size());
      lr = std::max<int64_t>(lr, responses[r].size());
    }
    at::Tensor ids = at::full({rows, lp}, c.pad_token_id, at::kLong);
    at::Tensor pos = at::zeros({rows, lp}, at::kLong);
    at::Tensor pad = at::zeros({rows, lp + lr}, at::kBool);
    for (int64_t r = 0; r < rows; ++r) {
      const auto& p = prompts[b0 + r];
      const int64_t off = lp - static_cast<int64_t>(p.size());
      ids[r].narrow(0, off, p.size()).copy_(at::tensor(p, at::kLong));
      pos[r].narrow(0, off, p.size()).copy_(at::arange((int64_t)p.size()));
      pad[r].narrow(0, 0, off).fill_(true);
    }
    PaddedBatchCache cache(c, rows, lp + lr, pad);
    at::Tensor hidden = model.Forward(ids.view(-1), pos.view(-1), cache);
    cache.Advance(lp);
    at::Tensor next_pos = pos.select(1, lp - 1) + 1;
    at::Tensor last = hidden.view({rows, lp, -1}).select(1, lp - 1);
    for (int64_t t = 0;; ++t) {
      at::Tensor probs = at::softmax(model.Logits(last), -1);
      at::multinomial(probs, 1);  // HF's per-step sampling cost
      if (t + 1 >= lr) break;
      std::vector<int64_t> step(rows, c.pad_token_id);
      for (int64_t r = 0; r < rows; ++r) {
        const auto& resp = responses[b0 + r];
        if (t < static_cast<int64_t>(resp.size())) step[r] = resp[t];
      }
      last = model.Forward(at::tensor(step, at::kLong), next_pos, cache);
      cache.Advance(1);
      next_pos = next_pos + 1;
    }
  }
  return Since(t0);
}

// ---- Engine runs
// -------------------------------------------------------------

struct RunResult {
  double seconds = 0;
  int64_t tokens = 0;
  infer::EngineStats stats;
  std::vector<std::vector<int64_t>> responses;  // prompt-major, sample-minor
  double TokPerS() const { return tokens / seconds; }
};

RunResult RunEngine(std::shared_ptr<models::CausalLM> model,
                    const EngineOptions& opt,
                    const std::vector<std::vector<int64_t>>& prompts,
                    const SamplingParams& params, bool share_prompts) {
  auto engine = LLMEngine::Create(model, opt);
  CHECK(engine.ok()) << engine.status();
  RunResult res;
  auto t0 = Clock::now();
  if (share_prompts) {
    for (auto& r : (*engine)->Generate(prompts, params)) {
      CHECK(r.ok()) << r.status();
      for (auto& c : r->outputs) res.responses.push_back(c.token_ids);
    }
  } else {
    // One request per sample, each with its own seed (sample i of a shared
    // request would draw from (seed, i); here every request is sample 0).
    std::vector<int64_t> ids;
    for (const auto& p : prompts) {
      for (int64_t i = 0; i < params.n; ++i) {
        SamplingParams one = params;
        one.n = 1;
        one.seed = params.seed.value_or(0) * 1000003 + ids.size();
        auto id = (*engine)->AddRequest(p, one);
        CHECK(id.ok()) << id.status();
        ids.push_back(*id);
      }
    }
    for (auto& r : (*engine)->RunUntilDone()) {
      res.responses.push_back(r.outputs[0].token_ids);
    }
  }
  res.seconds = Since(t0);
  for (const auto& r : res.responses) res.tokens += r.size();
  res.stats = (*engine)->stats();
  return res;
}

void PrintBreakdown(const char* name, const RunResult& r) {
  const infer::EngineStats& s = r.stats;
  const double sched = s.schedule_s + s.prepare_s;
  const double known =
      s.gemm_s + s.attention_s + s.elementwise_s + s.sample_s + sched;
  absl::PrintF(
      "  %-9s time split: GEMMs %.1f%% (%.1f GFLOP/s inside), attention "
      "%.1f%%, norms/rope/act %.1f%%, sampling %.1f%%, scheduling+prep "
      "%.1f%%, other %.1f%%\n",
      name, 100 * s.gemm_s / r.seconds,
      s.gemm_s > 0 ? s.gemm_flops / s.gemm_s / 1e9 : 0.0,
      100 * s.attention_s / r.seconds, 100 * s.elementwise_s / r.seconds,
      100 * s.sample_s / r.seconds, 100 * sched / r.seconds,
      100 * (r.seconds - known) / r.seconds);
}

struct Range {
  std::vector<double> v;
  void Add(double x) { v.push_back(x); }
  double Min() const { return *std::min_element(v.begin(), v.end()); }
  double Max() const { return *std::max_element(v.begin(), v.end()); }
  double Median() const {
    std::vector<double> s = v;
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  }
};

// One decode point: `b` greedy requests with 64-token prompts; `repeats`
// windows of `steps` decode steps, each next to a fresh GEMM peak.
struct DecodePoint {
  Range tok_s, gflops, fraction, peak, inner_gemm;
  double prefill_tok_s = 0;
  // The prefill's split (fractions of its wall time): GEMMs incl. the LM
  // head of the sampled rows, attention, norms/rope/act, sampling.
  double pf_gemm = 0, pf_attention = 0, pf_elementwise = 0, pf_sampling = 0;
  // Time split over all windows (fractions of decode wall time).
  double gemm = 0, attention = 0, elementwise = 0, sampling = 0, sched = 0,
         other = 0;
};
// The decode sweep's sampling parameters (--decode_temperature,
// --decode_top_p); Main validates them before any work.
SamplingParams DecodeSamplingParams() {
  SamplingParams g;
  g.temperature = absl::GetFlag(FLAGS_decode_temperature);
  g.do_sample = g.temperature > 0;
  g.top_p = absl::GetFlag(FLAGS_decode_top_p);
  g.seed = 1;
  g.ignore_eos = true;
  return g;
}

DecodePoint MeasureDecode(std::shared_ptr<models::CausalLM> model,
                          EngineOptions opt, int64_t b, int steps, int repeats,
                          const ModelFlops& flops, std::mt19937& rng) {
  opt.enable_prefix_caching = false;
  auto engine = LLMEngine::Create(model, opt);
  CHECK(engine.ok()) << engine.status();
  const int64_t vocab = model->config().vocab_size;
  std::uniform_int_distribution<int64_t> tok(0, vocab - 1);
  SamplingParams g = DecodeSamplingParams();
  g.max_tokens = repeats * steps + 2;
  const int64_t kPrompt = absl::GetFlag(FLAGS_decode_prompt);
  for (int64_t i = 0; i < b; ++i) {
    std::vector<int64_t> p(kPrompt);
    for (auto& t : p) t = tok(rng);
    CHECK((*engine)->AddRequest(p, g).ok());
  }
  DecodePoint d;
  auto tp = Clock::now();
  const infer::EngineStats p0 = (*engine)->stats();
  while ((*engine)->stats().prefill_tokens - p0.prefill_tokens < b * kPrompt) {
    (*engine)->Step();  // prefill (one step unless over the token budget)
  }
  const double prefill_s = Since(tp);
  d.prefill_tok_s = b * kPrompt / prefill_s;
  {
    const infer::EngineStats p1 = (*engine)->stats();
    d.pf_gemm = (p1.gemm_s - p0.gemm_s) / prefill_s;
    d.pf_attention = (p1.attention_s - p0.attention_s) / prefill_s;
    d.pf_elementwise = (p1.elementwise_s - p0.elementwise_s) / prefill_s;
    d.pf_sampling = (p1.sample_s - p0.sample_s) / prefill_s;
  }
  (*engine)->Step();  // first decode (warm-up)
  double total = 0;
  for (int w = 0; w < repeats; ++w) {
    const double peak =
        std::max(GemmGflops(1024, 1024, 1024), GemmGflops(2048, 2048, 2048));
    const infer::EngineStats s0 = (*engine)->stats();
    auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) (*engine)->Step();
    const double secs = Since(t0);
    const infer::EngineStats s1 = (*engine)->stats();
    // Context during the window: prompt + 2 + w*steps .. + steps.
    const double ctx = kPrompt + 2 + w * steps + steps / 2.0;
    const double rate =
        b * steps * (flops.matmul + flops.attention_per_ctx * ctx) / secs / 1e9;
    d.tok_s.Add(b * steps / secs);
    d.gflops.Add(rate);
    d.peak.Add(peak);
    d.fraction.Add(rate / peak);
    const double gemm = s1.gemm_s - s0.gemm_s;
    if (gemm > 0)
      d.inner_gemm.Add((s1.gemm_flops - s0.gemm_flops) / gemm / 1e9);
    const double attn = s1.attention_s - s0.attention_s;
    const double elem = s1.elementwise_s - s0.elementwise_s;
    const double samp = s1.sample_s - s0.sample_s;
    const double sched =
        s1.schedule_s - s0.schedule_s + s1.prepare_s - s0.prepare_s;
    // Unfused runs have no GEMM timer: their forward minus attention.
    const double fwd = s1.forward_s - s0.forward_s + s1.logits_s - s0.logits_s;
    const double g2 = gemm > 0 ? gemm : fwd - attn;
    d.gemm += g2;
    d.attention += attn;
    d.elementwise += elem;
    d.sampling += samp;
    d.sched += sched;
    d.other += secs - g2 - attn - elem - samp - sched;
    total += secs;
  }
  for (double* x :
       {&d.gemm, &d.attention, &d.elementwise, &d.sampling, &d.sched, &d.other})
    *x /= total;
  return d;
}

void PrintDecode(const char* tag, int64_t b, const DecodePoint& d) {
  absl::PrintF(
      "  %-8s batch %4d: %7.1f tok/s [%.1f-%.1f]  %6.1f GFLOP/s = %4.1f%% "
      "[%.1f-%.1f%%] of GEMM peak %.1f [%.1f-%.1f]; prefill %.0f tok/s; "
      "load %s",
      tag, b, d.tok_s.Median(), d.tok_s.Min(), d.tok_s.Max(), d.gflops.Median(),
      100 * d.fraction.Median(), 100 * d.fraction.Min(), 100 * d.fraction.Max(),
      d.peak.Median(), d.peak.Min(), d.peak.Max(), d.prefill_tok_s,
      LoadAverage());
  if (!d.inner_gemm.v.empty()) {
    absl::PrintF("; GEMMs inside run at %.1f GFLOP/s", d.inner_gemm.Median());
  }
  absl::PrintF(
      "\n             split: GEMMs %.0f%%, attention %.0f%%, norms/rope/act "
      "%.0f%%, sampling %.0f%%, sched+prep %.0f%%, other %.0f%%\n",
      100 * d.gemm, 100 * d.attention, 100 * d.elementwise, 100 * d.sampling,
      100 * d.sched, 100 * d.other);
  absl::PrintF(
      "             prefill split: GEMMs %.0f%%, attention %.0f%%, "
      "norms/rope/act %.0f%%, sampling %.0f%%, other %.0f%%\n",
      100 * d.pf_gemm, 100 * d.pf_attention, 100 * d.pf_elementwise,
      100 * d.pf_sampling,
      100 *
          (1 - d.pf_gemm - d.pf_attention - d.pf_elementwise - d.pf_sampling));
}

// The GRPO workload three ways (engine, no prefix sharing, static
// batching); returns {speedup vs static, prefix sharing gain}.
std::pair<double, double> RunWorkload(
    std::shared_ptr<models::CausalLM> model, const EngineOptions& opt,
    const std::vector<std::vector<int64_t>>& prompts,
    const SamplingParams& params) {
  RunResult eng = RunEngine(model, opt, prompts, params, true);
  int64_t longest = 0;
  for (auto& r : eng.responses) longest = std::max<int64_t>(longest, r.size());
  absl::PrintF(
      "engine:   %6d tokens in %6.2f s = %8.1f tok/s  (steps %d, "
      "preemptions %d, prefix hit rate %.2f, mean response %.1f, "
      "longest %d)\n",
      eng.tokens, eng.seconds, eng.TokPerS(), eng.stats.steps,
      eng.stats.preemptions, eng.stats.prefix_cache_hit_rate,
      double(eng.tokens) / eng.responses.size(), longest);
  EngineOptions no_cache = opt;
  no_cache.enable_prefix_caching = false;
  RunResult ns = RunEngine(model, no_cache, prompts, params, false);
  absl::PrintF(
      "no_share: %6d tokens in %6.2f s = %8.1f tok/s  (prefill "
      "tokens %d vs %d with sharing)\n",
      ns.tokens, ns.seconds, ns.TokPerS(), ns.stats.prefill_tokens,
      eng.stats.prefill_tokens);
  std::vector<std::vector<int64_t>> rows;
  for (const auto& p : prompts) {
    for (int i = 0; i < params.n; ++i) rows.push_back(p);
  }
  const double st =
      RunStatic(*model, rows, eng.responses, absl::GetFlag(FLAGS_static_batch));
  absl::PrintF(
      "static:   %6d tokens in %6.2f s = %8.1f tok/s  (batch %d, "
      "padded contiguous KV, runs to longest)\n",
      eng.tokens, st, eng.tokens / st, absl::GetFlag(FLAGS_static_batch));
  PrintBreakdown("engine", eng);
  PrintBreakdown("no_share", ns);

  return {eng.TokPerS() / (eng.tokens / st), eng.TokPerS() / ns.TokPerS()};
}

int Main() {
  if (absl::Status st = infer::ValidateSamplingParams(DecodeSamplingParams());
      !st.ok()) {
    absl::FPrintF(stderr,
                  "bench_rollout: --decode_temperature/--decode_top_p: %s\n",
                  st.message());
    return 1;
  }
  const int threads = absl::GetFlag(FLAGS_threads);
  infer::SetIntraOpThreads(threads);  // before the first GEMM (BLIS threads)
  auto cfg = models::MakePreset(absl::GetFlag(FLAGS_preset),
                                absl::GetFlag(FLAGS_vocab));
  CHECK(cfg.ok()) << cfg.status();
  if (absl::GetFlag(FLAGS_num_kv_heads) > 0) {
    cfg->num_key_value_heads = absl::GetFlag(FLAGS_num_kv_heads);
  }
  const int64_t max_resp = absl::GetFlag(FLAGS_max_response);
  cfg->max_position_embeddings = std::max<int64_t>(
      cfg->max_position_embeddings, absl::GetFlag(FLAGS_max_prompt) + max_resp);
  auto model = models::CreateModel(*cfg, /*seed=*/1);
  const double peak =
      std::max(GemmGflops(2048, 2048, 2048), GemmGflops(1024, 1024, 1024));
  const auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? value : "unset";
  };
  absl::PrintF(
      "threads=%d BLIS_NUM_THREADS=%s OMP_WAIT_POLICY=%s BLIS_ARCH_TYPE=%s "
      "blas=%s\n",
      threads, env("BLIS_NUM_THREADS"), env("OMP_WAIT_POLICY"),
      env("BLIS_ARCH_TYPE"), profiler::LoadedBlasLibrary());
  absl::PrintF(
      "model=%s (hidden %d, %d layers, %d/%d heads, intermediate %d, vocab "
      "%d) params=%.1fM  gemm_peak=%.1f GFLOP/s (fp32, best of 2048^3 / "
      "1024^3)  cpu_isa=%s  load %s\n",
      absl::GetFlag(FLAGS_preset), cfg->hidden_size, cfg->num_hidden_layers,
      cfg->num_attention_heads, cfg->num_key_value_heads,
      cfg->intermediate_size, cfg->vocab_size,
      models::NumParameters(*model) / 1e6, peak,
      infer::CpuIsaName(infer::ActiveCpuIsa()), LoadAverage());

  // Workload.
  const int n = absl::GetFlag(FLAGS_n);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> len(absl::GetFlag(FLAGS_min_prompt),
                                             absl::GetFlag(FLAGS_max_prompt));
  std::uniform_int_distribution<int64_t> tok(0, cfg->vocab_size - 1);
  std::vector<std::vector<int64_t>> prompts(absl::GetFlag(FLAGS_num_prompts));
  for (auto& p : prompts) {
    p.resize(len(rng));
    for (auto& t : p) t = tok(rng);
  }
  SamplingParams params;
  params.n = n;
  params.temperature = 1.0;
  params.max_tokens = max_resp;
  params.seed = 3;
  for (int i = 0; i < absl::GetFlag(FLAGS_stop_ids); ++i) {
    params.stop_token_ids.push_back(cfg->vocab_size - 2 - i);
  }
  EngineOptions opt;
  opt.max_num_seqs = 256;
  opt.max_num_batched_tokens = 8192;
  opt.kv_cache_bytes = int64_t{2} << 30;
  opt.max_model_len = cfg->max_position_embeddings;
  absl::PrintF(
      "workload: %d prompts x n=%d, prompt len %d-%d, responses <= "
      "%d (stop ids %d)\n",
      prompts.size(), n, absl::GetFlag(FLAGS_min_prompt),
      absl::GetFlag(FLAGS_max_prompt), max_resp, absl::GetFlag(FLAGS_stop_ids));

  double speedup_vs_static = 0, prefix_gain = 0;
  if (absl::GetFlag(FLAGS_workload)) {
    const auto [speedup, gain] = RunWorkload(model, opt, prompts, params);
    speedup_vs_static = speedup;
    prefix_gain = gain;
  }

  // Decode sweep: B requests of 64-token prompts, greedy, fixed length.
  const ModelFlops flops = CountFlops(*cfg);
  const int steps = absl::GetFlag(FLAGS_decode_steps);
  const int repeats = absl::GetFlag(FLAGS_decode_repeats);
  absl::PrintF(
      "decode sweep (prompt %d, %d windows x %d steps; FLOPs per token = "
      "%.1f M matmul + %.3f M per context token of attention; median "
      "[min-max]):\n",
      absl::GetFlag(FLAGS_decode_prompt), repeats, steps, flops.matmul / 1e6,
      flops.attention_per_ctx / 1e6);
  double best_fraction = 0, best_lo = 0, best_hi = 0;
  for (absl::string_view b_str :
       absl::StrSplit(absl::GetFlag(FLAGS_decode_batches), ',')) {
    int64_t b = 0;
    CHECK(absl::SimpleAtoi(b_str, &b));
    if (absl::GetFlag(FLAGS_compare_full_head)) {
      EngineOptions full = opt;
      full.chunked_lm_head = false;
      PrintDecode("fullhead", b,
                  MeasureDecode(model, full, b, steps, repeats, flops, rng));
    }
    const DecodePoint d =
        MeasureDecode(model, opt, b, steps, repeats, flops, rng);
    PrintDecode("fused", b, d);
    if (b >= 64 && d.fraction.Median() > best_fraction) {
      best_fraction = d.fraction.Median();
      best_lo = d.fraction.Min();
      best_hi = d.fraction.Max();
    }
    if (b >= 64 && absl::GetFlag(FLAGS_compare_unfused)) {
      EngineOptions plain = opt;
      plain.fused_forward = false;
      PrintDecode("unfused", b,
                  MeasureDecode(model, plain, b, steps, repeats, flops, rng));
    }
  }
  absl::PrintF(
      "decode_gemm_fraction range at the best batch >= 64: %.2f-%.2f\n",
      best_lo, best_hi);
  absl::PrintF(
      "rollout_speedup_vs_static=%.2f prefix_sharing_gain=%.2f "
      "decode_gemm_fraction=%.2f\n",
      speedup_vs_static, prefix_gain, best_fraction);
  return 0;
}

}  // namespace
}  // namespace verl

int main(int argc, char** argv) {
  // As //tools:generate and serve run: freed tensors stay in the heap
  // (core/malloc_tuning.h), and libgomp's default wait policy (threads spin
  // briefly between parallel regions; an oversubscribed machine measures
  // better with OMP_WAIT_POLICY=passive, printed below).
  verl::core::ReexecWithHeapRetainingMalloc(argv);
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  return verl::Main();
}
