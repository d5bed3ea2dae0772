// File: verl/models/vlm/vision.cc
#include "verl/models/vlm/vision.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/argsort.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <glog/logging.h>

#include <cmath>
#include <string>

#include "verl/models/recompute.h"

namespace verl::models::vlm {
namespace {

// A plain container so that children read "<name>.<child>".
std::shared_ptr<torch::nn::Module> Container() {
  return std::make_shared<torch::nn::Module>();
}

}  // namespace

VisionLayout MakeVisionLayout(const std::vector<GridThw>& grids,
                              const VisionConfig& c) {
  const int64_t sms = c.spatial_merge_size;
  const int64_t unit = c.MergeUnit();
  const int64_t vmws = c.window_size / sms / c.patch_size;  // in merge units
  VisionLayout out;
  out.cu_window = {0};
  out.cu_image = {0};
  int64_t base = 0;
  for (const auto& [t, h, w] : grids) {
    CHECK(h % sms == 0 && w % sms == 0)
        << "grid " << h << "x" << w << " not a multiple of " << sms;
    for (int64_t f = 0; f < t; ++f) {
      out.cu_image.push_back(out.cu_image.back() + h * w);
    }
    const int64_t lh = h / sms, lw = w / sms;
    // Patch coordinates in pixel_values order: (t, h/m, w/m, m, m).
    for (int64_t f = 0; f < t; ++f) {
      for (int64_t bh = 0; bh < lh; ++bh) {
        for (int64_t bw = 0; bw < lw; ++bw) {
          for (int64_t mh = 0; mh < sms; ++mh) {
            for (int64_t mw = 0; mw < sms; ++mw) {
              out.row.push_back(bh * sms + mh);
              out.col.push_back(bw * sms + mw);
            }
          }
        }
      }
    }
    if (!c.HasWindows()) {
      // Qwen2-VL: units in their own order, "windows" = the frames.
      const int64_t units = t * (h / sms) * (w / sms);
      for (int64_t u = 0; u < units; ++u) out.window_index.push_back(base + u);
      base += units;
      continue;
    }
    // Windows of vmws x vmws merge units; HF pads the grid to whole windows
    // (a full extra window when it already divides) and drops empty ones.
    const int64_t nh = (lh + vmws - lh % vmws) / vmws;
    const int64_t nw = (lw + vmws - lw % vmws) / vmws;
    for (int64_t f = 0; f < t; ++f) {
      for (int64_t wh = 0; wh < nh; ++wh) {
        for (int64_t ww = 0; ww < nw; ++ww) {
          int64_t count = 0;
          for (int64_t i = 0; i < vmws; ++i) {
            for (int64_t j = 0; j < vmws; ++j) {
              const int64_t r = wh * vmws + i, col = ww * vmws + j;
              if (r >= lh || col >= lw) continue;
              out.window_index.push_back(base + (f * lh + r) * lw + col);
              ++count;
            }
          }
          if (count > 0)
            out.cu_window.push_back(out.cu_window.back() + count * unit);
        }
      }
    }
    base += t * lh * lw;
  }
  if (!c.HasWindows()) out.cu_window = out.cu_image;
  return out;
}

VisionAttention::VisionAttention(int64_t dim, int64_t heads_in)
    : heads(heads_in) {
  qkv = register_module("qkv", std::make_shared<Linear>(dim, 3 * dim, true));
  proj = register_module("proj", std::make_shared<Linear>(dim, dim, true));
}

at::Tensor VisionAttention::Forward(const at::Tensor& x, const at::Tensor& cos,
                                    const at::Tensor& sin,
                                    const std::vector<int64_t>& cu) const {
  const int64_t n = x.size(0), dim = x.size(1), hd = dim / heads;
  const c10::ScalarType ct = ComputeDtype(x.scalar_type());
  at::Tensor qkv_out = qkv->Forward(x).reshape({n, 3, heads, hd});
  // RoPE in the compute dtype (HF apply_rotary_pos_emb_vision upcasts).
  at::Tensor q =
      ApplyRope(qkv_out.select(1, 0).to(ct), cos, sin).to(x.scalar_type());
  at::Tensor k =
      ApplyRope(qkv_out.select(1, 1).to(ct), cos, sin).to(x.scalar_type());
  at::Tensor v = qkv_out.select(1, 2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i + 1 < cu.size(); ++i) {
    const int64_t a = cu[i], len = cu[i + 1] - cu[i];
    at::Tensor qs = q.narrow(0, a, len).transpose(0, 1);  // [heads, L, hd]
    at::Tensor ks = k.narrow(0, a, len).transpose(0, 1);
    at::Tensor vs = v.narrow(0, a, len).transpose(0, 1);
    at::Tensor probs =
        at::softmax(at::matmul(qs, ks.transpose(1, 2)) * scale, -1, ct)
            .to(x.scalar_type());
    outs.push_back(at::matmul(probs, vs).transpose(0, 1).reshape({len, dim}));
  }
  return proj->Forward(at::cat(outs, 0));
}

LayerNorm::LayerNorm(int64_t dim, double eps_in) : eps(eps_in) {
  weight = register_parameter("weight", at::ones({dim}));
  bias = register_parameter("bias", at::zeros({dim}));
}

at::Tensor LayerNorm::Forward(const at::Tensor& x) const {
  return at::layer_norm(x, {x.size(-1)}, weight, bias, eps);
}

VisionNorm::VisionNorm(torch::nn::Module& parent, const std::string& name,
                       const VisionConfig& c) {
  if (c.IsQwen2Vl()) {
    layer_norm = parent.register_module(
        name, std::make_shared<LayerNorm>(c.hidden_size, c.rms_norm_eps));
  } else {
    rms = parent.register_module(
        name, std::make_shared<RMSNorm>(c.hidden_size, c.rms_norm_eps));
  }
}

at::Tensor VisionNorm::Forward(const at::Tensor& x) const {
  return rms ? rms->Forward(x) : layer_norm->Forward(x);
}

at::Tensor VisionActivation(const std::string& name, const at::Tensor& x) {
  if (name == "quick_gelu") return x * at::sigmoid(1.702 * x);
  if (name == "gelu") return at::gelu(x);
  if (name == "gelu_pytorch_tanh") return at::gelu(x, "tanh");
  CHECK_EQ(name, "silu") << "vision hidden_act";
  return at::silu(x);
}

VisionMlp::VisionMlp(const VisionConfig& c) {
  const int64_t dim = c.hidden_size, hidden = c.intermediate_size;
  if (c.IsQwen2Vl()) {
    act = c.hidden_act;
    fc1 = register_module("fc1", std::make_shared<Linear>(dim, hidden, true));
    fc2 = register_module("fc2", std::make_shared<Linear>(hidden, dim, true));
    return;
  }
  gate_proj =
      register_module("gate_proj", std::make_shared<Linear>(dim, hidden, true));
  up_proj =
      register_module("up_proj", std::make_shared<Linear>(dim, hidden, true));
  down_proj =
      register_module("down_proj", std::make_shared<Linear>(hidden, dim, true));
}

at::Tensor VisionMlp::Forward(const at::Tensor& x) const {
  if (fc1) return fc2->Forward(VisionActivation(act, fc1->Forward(x)));
  return down_proj->Forward(at::silu(gate_proj->Forward(x)) *
                            up_proj->Forward(x));
}

VisionBlock::VisionBlock(const VisionConfig& c)
    : norm1(*this, "norm1", c), norm2(*this, "norm2", c) {
  attn = register_module(
      "attn", std::make_shared<VisionAttention>(c.hidden_size, c.num_heads));
  mlp = register_module("mlp", std::make_shared<VisionMlp>(c));
}

at::Tensor VisionBlock::Forward(const at::Tensor& x, const at::Tensor& cos,
                                const at::Tensor& sin,
                                const std::vector<int64_t>& cu) const {
  at::Tensor h = x + attn->Forward(norm1.Forward(x), cos, sin, cu);
  return h + mlp->Forward(norm2.Forward(h));
}

PatchMerger::PatchMerger(const VisionConfig& c)
    : merged_dim(c.hidden_size * c.MergeUnit()), ln_q(*this, "ln_q", c) {
  auto mlp = register_module("mlp", Container());
  fc1 = mlp->register_module(
      "0", std::make_shared<Linear>(merged_dim, merged_dim, true));
  fc2 = mlp->register_module(
      "2", std::make_shared<Linear>(merged_dim, c.out_hidden_size, true));
}

at::Tensor PatchMerger::Forward(const at::Tensor& x) const {
  at::Tensor h = ln_q.Forward(x).reshape({-1, merged_dim});
  return fc2->Forward(at::gelu(fc1->Forward(h)));
}

VisionTower::VisionTower(const VisionConfig& c) : config_(c) {
  auto pe = register_module("patch_embed", Container());
  patch_embed = pe->register_module(
      "proj", std::make_shared<WeightHolder>(
                  at::zeros({c.hidden_size, c.in_chans, c.temporal_patch_size,
                             c.patch_size, c.patch_size})));
  auto list = register_module("blocks", Container());
  for (int64_t b = 0; b < c.depth; ++b) {
    blocks.push_back(list->register_module(std::to_string(b),
                                           std::make_shared<VisionBlock>(c)));
  }
  merger = register_module("merger", std::make_shared<PatchMerger>(c));
  // VisionRotaryEmbedding(head_dim / 2, theta 10000).
  const int64_t dim = c.HeadDim() / 2;
  inv_freq_ = 1.0 / at::pow(10000.0, at::arange(0, dim, 2, at::kDouble) /
                                         static_cast<double>(dim));
}

at::Tensor VisionTower::Forward(const at::Tensor& pixel_values,
                                const std::vector<GridThw>& grids) const {
  const VisionLayout layout = MakeVisionLayout(grids, config_);
  const int64_t n = pixel_values.size(0), unit = config_.MergeUnit();
  CHECK_EQ(n, layout.cu_image.back())
      << "pixel_values rows do not match image_grid_thw";
  CHECK_EQ(pixel_values.size(1), config_.PatchDim());
  const at::Tensor& w = patch_embed->weight;
  at::Tensor x = LinearOp(pixel_values.to(w.scalar_type()),
                          w.reshape({config_.hidden_size, -1}));

  // Patch permutation into window order (whole merge units move); none
  // without windows.
  const bool windowed = config_.HasWindows();
  at::Tensor rows = at::tensor(layout.row, at::kLong);
  at::Tensor cols = at::tensor(layout.col, at::kLong);
  if (windowed) {
    std::vector<int64_t> perm;
    perm.reserve(n);
    for (int64_t u : layout.window_index) {
      for (int64_t k = 0; k < unit; ++k) perm.push_back(u * unit + k);
    }
    at::Tensor perm_t = at::tensor(perm, at::kLong);
    x = x.index_select(0, perm_t.to(x.device()));
    rows = rows.index_select(0, perm_t);
    cols = cols.index_select(0, perm_t);
  }

  // 2-D rotary: [row * inv_freq, col * inv_freq], duplicated to head_dim.
  const c10::ScalarType ct = ComputeDtype(x.scalar_type());
  at::Tensor f = inv_freq_.to(ct);
  at::Tensor freqs = at::cat({rows.to(ct).unsqueeze(1) * f.unsqueeze(0),
                              cols.to(ct).unsqueeze(1) * f.unsqueeze(0)},
                             1);
  at::Tensor emb = at::cat({freqs, freqs}, 1).to(x.device());
  at::Tensor cos = emb.cos(), sin = emb.sin();

  const bool checkpoint = checkpointing_ && at::GradMode::is_enabled();
  for (int64_t b = 0; b < static_cast<int64_t>(blocks.size()); ++b) {
    const std::vector<int64_t>& cu =
        config_.IsFullAttention(b) ? layout.cu_image : layout.cu_window;
    if (checkpoint) {
      // The closure owns what the recompute needs (block, rotary tables,
      // boundaries): backward runs after this frame has returned.
      std::shared_ptr<VisionBlock> block = blocks[b];
      RecomputeFn fn = [block, cos, sin, cu](const TensorList& in) {
        return TensorList{block->Forward(in[0], cos, sin, cu)};
      };
      x = Checkpoint(fn, {x}, block->parameters())[0];
    } else {
      x = blocks[b]->Forward(x, cos, sin, cu);
    }
  }
  at::Tensor merged = merger->Forward(x);
  if (!windowed) return merged;
  at::Tensor reverse = at::argsort(
      at::tensor(layout.window_index, at::kLong).to(merged.device()));
  return merged.index_select(0, reverse);
}

std::vector<GridThw> GridsFromTensor(const at::Tensor& image_grid_thw) {
  CHECK_EQ(image_grid_thw.dim(), 2);
  CHECK_EQ(image_grid_thw.size(1), 3);
  at::Tensor g = image_grid_thw.to(at::kLong).cpu().contiguous();
  const int64_t* p = g.data_ptr<int64_t>();
  std::vector<GridThw> out;
  for (int64_t i = 0; i < g.size(0); ++i) {
    out.push_back({p[3 * i], p[3 * i + 1], p[3 * i + 2]});
  }
  return out;
}

}  // namespace verl::models::vlm
