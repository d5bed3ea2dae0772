#!/usr/bin/python3
"""Golden values for deepseek_v3_test: a float64 DeepSeek-V3 forward written
from HF transformers' modeling_deepseek_v3 equations (no transformers needed).

For each variant it writes testdata/<variant>/ as an HF folder (config.json,
model.safetensors with bf16 weights under HF's tensor names) plus golden.safetensors
(input ids, positions, sequence bounds, float64 logits, log-probs of the next
token and the gradients of their mean for a few tensors). The reference runs one
sequence at a time in [batch, heads, seq, dim] layout with an explicit causal
mask, independent of the packed C++ path.

Run: /usr/bin/python3 verl/models/mla/gen_deepseek_v3_golden.py (torch 1.13).
"""

import json
import math
import os
import struct

import torch

HERE = os.path.dirname(os.path.abspath(__file__))

VARIANTS = {
    # q and kv compression, YaRN with both mscales, interleaved rope, 2 shared.
    "deepseek_v3_tiny": dict(
        vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=3,
        num_attention_heads=2, num_key_value_heads=2, q_lora_rank=12,
        kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=6,
        n_routed_experts=8, num_experts_per_tok=3, moe_intermediate_size=8,
        n_shared_experts=2, first_k_dense_replace=1, moe_layer_freq=1, n_group=4,
        topk_group=2, routed_scaling_factor=2.5, norm_topk_prob=True,
        scoring_func="sigmoid", topk_method="noaux_tc", rms_norm_eps=1e-6,
        rope_theta=10000.0, max_position_embeddings=64, attention_bias=False,
        rope_interleave=True, tie_word_embeddings=False,
        rope_scaling={"type": "yarn", "factor": 4.0,
                      "original_max_position_embeddings": 16, "beta_fast": 32,
                      "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 1.0}),
    # No q compression, plain RoPE in rotate-half layout, attention bias, no
    # shared experts, no renormalisation, all groups kept.
    "deepseek_v3_plain": dict(
        vocab_size=40, hidden_size=16, intermediate_size=24, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, q_lora_rank=None,
        kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=8,
        n_routed_experts=4, num_experts_per_tok=2, moe_intermediate_size=8,
        n_shared_experts=None, first_k_dense_replace=1, moe_layer_freq=1,
        n_group=2, topk_group=2, routed_scaling_factor=1.5, norm_topk_prob=False,
        scoring_func="sigmoid", topk_method="noaux_tc", rms_norm_eps=1e-5,
        rope_theta=500.0, max_position_embeddings=64, attention_bias=True,
        rope_interleave=False, tie_word_embeddings=False, rope_scaling=None),
}

SEQ_LENS = [9, 6]
GRAD_TENSORS = [
    "model.embed_tokens.weight",
    "model.layers.1.self_attn.kv_b_proj.weight",
    "model.layers.1.self_attn.kv_a_layernorm.weight",
    "model.layers.1.mlp.gate.weight",
    "model.layers.1.mlp.experts.0.down_proj.weight",
    "model.layers.0.mlp.up_proj.weight",
]


def param_shapes(c):
    h, nh = c["hidden_size"], c["num_attention_heads"]
    qk = c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    b = c["attention_bias"]
    shapes = {"model.embed_tokens.weight": [c["vocab_size"], h]}
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        shapes[p + "input_layernorm.weight"] = [h]
        shapes[p + "post_attention_layernorm.weight"] = [h]
        a = p + "self_attn."
        if c["q_lora_rank"]:
            shapes[a + "q_a_proj.weight"] = [c["q_lora_rank"], h]
            if b:
                shapes[a + "q_a_proj.bias"] = [c["q_lora_rank"]]
            shapes[a + "q_a_layernorm.weight"] = [c["q_lora_rank"]]
            shapes[a + "q_b_proj.weight"] = [nh * qk, c["q_lora_rank"]]
        else:
            shapes[a + "q_proj.weight"] = [nh * qk, h]
        kv_a = c["kv_lora_rank"] + c["qk_rope_head_dim"]
        shapes[a + "kv_a_proj_with_mqa.weight"] = [kv_a, h]
        if b:
            shapes[a + "kv_a_proj_with_mqa.bias"] = [kv_a]
        shapes[a + "kv_a_layernorm.weight"] = [c["kv_lora_rank"]]
        shapes[a + "kv_b_proj.weight"] = [
            nh * (c["qk_nope_head_dim"] + c["v_head_dim"]), c["kv_lora_rank"]]
        shapes[a + "o_proj.weight"] = [h, nh * c["v_head_dim"]]
        if b:
            shapes[a + "o_proj.bias"] = [h]

        def mlp(prefix, inter):
            shapes[prefix + "gate_proj.weight"] = [inter, h]
            shapes[prefix + "up_proj.weight"] = [inter, h]
            shapes[prefix + "down_proj.weight"] = [h, inter]

        if l >= c["first_k_dense_replace"]:
            e = c["n_routed_experts"]
            shapes[p + "mlp.gate.weight"] = [e, h]
            shapes[p + "mlp.gate.e_score_correction_bias"] = [e]
            for i in range(e):
                mlp(p + f"mlp.experts.{i}.", c["moe_intermediate_size"])
            if c["n_shared_experts"]:
                mlp(p + "mlp.shared_experts.",
                    c["moe_intermediate_size"] * c["n_shared_experts"])
        else:
            mlp(p + "mlp.", c["intermediate_size"])
    shapes["model.norm.weight"] = [h]
    shapes["lm_head.weight"] = [c["vocab_size"], h]
    return shapes


def random_weights(c, gen):
    w = {}
    for name, shape in param_shapes(c).items():
        if name.endswith("norm.weight"):
            t = 1.0 + 0.2 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith("e_score_correction_bias"):
            t = 0.05 * torch.randn(shape, generator=gen, dtype=torch.float64)
        elif name.endswith(".bias"):
            t = 0.1 * torch.randn(shape, generator=gen, dtype=torch.float64)
        else:
            t = torch.randn(shape, generator=gen, dtype=torch.float64) / math.sqrt(
                shape[-1]) * (3.0 if name.endswith("gate.weight") else 1.0)
        # Stored as bf16; the reference uses the rounded values exactly.
        w[name] = t.to(torch.bfloat16).to(torch.float64)
    return w


# --- HF modeling_deepseek_v3 equations, float64 -------------------------------

def rms_norm(x, weight, eps):
    var = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(var + eps))


def linear(x, w, name, bias=None):
    y = x @ w[name + ".weight"].T
    if (name + ".bias") in w:
        y = y + w[name + ".bias"]
    return y


def yarn_get_mscale(scale=1.0, mscale=1.0):
    if scale <= 1:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def rope_tables(c, positions):
    """HF DeepseekV3RotaryEmbedding (default or _compute_yarn_parameters)."""
    dim, base = c["qk_rope_head_dim"], c["rope_theta"]
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    inv_freq = 1.0 / pos_freqs
    attention_factor = 1.0
    rs = c["rope_scaling"]
    if rs is not None:
        factor = rs["factor"]
        orig = rs["original_max_position_embeddings"]
        mscale, mscale_all_dim = rs.get("mscale"), rs.get("mscale_all_dim")
        if mscale and mscale_all_dim:
            attention_factor = yarn_get_mscale(factor, mscale) / yarn_get_mscale(
                factor, mscale_all_dim)
        else:
            attention_factor = yarn_get_mscale(factor)
        beta_fast, beta_slow = rs.get("beta_fast") or 32, rs.get("beta_slow") or 1

        def correction_dim(num_rotations):
            return (dim * math.log(orig / (num_rotations * 2 * math.pi))) / (
                2 * math.log(base))

        low = max(math.floor(correction_dim(beta_fast)), 0)
        high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
        if low == high:
            high += 0.001
        ramp = torch.clamp(
            (torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
        extrapolation_factor = 1 - ramp
        inv_freq = (1.0 / (factor * pos_freqs)) * (1 - extrapolation_factor) + \
            (1.0 / pos_freqs) * extrapolation_factor
    freqs = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * attention_factor, emb.sin() * attention_factor


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(q, k, cos, sin, interleave):
    cos, sin = cos[None, None], sin[None, None]  # [1, 1, s, d]
    if interleave:  # apply_rotary_pos_emb_interleave
        b, h, s, d = q.shape
        q = q.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
        b, h, s, d = k.shape
        k = k.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def attention(c, w, p, x, cos, sin):
    """DeepseekV3Attention.forward with eager attention; x [1, s, H]."""
    bsz, s, _ = x.shape
    nh, nope, rope, vd = (c["num_attention_heads"], c["qk_nope_head_dim"],
                          c["qk_rope_head_dim"], c["v_head_dim"])
    qk = nope + rope
    if c["q_lora_rank"]:
        q = linear(rms_norm(linear(x, w, p + "q_a_proj"),
                            w[p + "q_a_layernorm.weight"], 1e-6), w, p + "q_b_proj")
    else:
        q = linear(x, w, p + "q_proj")
    q = q.view(bsz, s, -1, qk).transpose(1, 2)
    q_pass, q_rot = torch.split(q, [nope, rope], dim=-1)
    compressed = linear(x, w, p + "kv_a_proj_with_mqa")
    k_pass, k_rot = torch.split(compressed, [c["kv_lora_rank"], rope], dim=-1)
    k_pass = linear(rms_norm(k_pass, w[p + "kv_a_layernorm.weight"], 1e-6), w,
                    p + "kv_b_proj").view(bsz, s, -1, nope + vd).transpose(1, 2)
    k_pass, value = torch.split(k_pass, [nope, vd], dim=-1)
    k_rot = k_rot.view(bsz, 1, s, rope)
    q_rot, k_rot = apply_rope(q_rot, k_rot, cos, sin, c["rope_interleave"])
    k_rot = k_rot.expand(*k_pass.shape[:-1], -1)
    query = torch.cat((q_pass, q_rot), dim=-1)
    key = torch.cat((k_pass, k_rot), dim=-1)
    scaling = qk ** -0.5
    rs = c["rope_scaling"]
    if rs is not None and rs.get("mscale_all_dim", 0):
        m = yarn_get_mscale(rs["factor"], rs["mscale_all_dim"])
        scaling = scaling * m * m
    scores = (query @ key.transpose(2, 3)) * scaling
    mask = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    scores = scores.masked_fill(mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = (probs @ value).transpose(1, 2).reshape(bsz, s, -1)
    return linear(out, w, p + "o_proj")


def mlp(w, p, x):
    return linear(torch.nn.functional.silu(linear(x, w, p + "gate_proj")) *
                  linear(x, w, p + "up_proj"), w, p + "down_proj")


MARGINS = []
BIAS_CHANGED = [0]


def router(c, w, p, x):
    """DeepseekV3TopkRouter.forward; x [n, H]."""
    e, k = c["n_routed_experts"], c["num_experts_per_tok"]
    ng, tg = c["n_group"], c["topk_group"]
    logits = x @ w[p + "gate.weight"].T
    scores = logits.sigmoid()

    def choose(bias):
        choice = scores.detach() + bias.unsqueeze(0)
        group_scores = choice.view(-1, ng, e // ng).topk(2, dim=-1)[0].sum(dim=-1)
        group_idx = torch.topk(group_scores, k=tg, dim=-1, sorted=False)[1]
        group_mask = torch.zeros_like(group_scores)
        group_mask.scatter_(1, group_idx, 1)
        score_mask = group_mask.unsqueeze(-1).expand(-1, ng, e // ng).reshape(-1, e)
        choice = choice.masked_fill(~score_mask.bool(), 0.0)
        idx = torch.topk(choice, k=k, dim=-1, sorted=False)[1]
        # Selection margins (a near-tie would make the golden fragile).
        sg = group_scores.sort(dim=-1, descending=True)[0]
        if tg < ng:
            MARGINS.append((sg[:, tg - 1] - sg[:, tg]).min().item())
        sc = choice.sort(dim=-1, descending=True)[0]
        MARGINS.append((sc[:, k - 1] - sc[:, k]).min().item())
        return idx

    idx = choose(w[p + "gate.e_score_correction_bias"])
    idx0 = choose(torch.zeros(e, dtype=torch.float64))
    BIAS_CHANGED[0] += int((idx.sort(-1)[0] != idx0.sort(-1)[0]).any(-1).sum())
    weights = scores.gather(1, idx)
    if c["norm_topk_prob"]:
        weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return idx, weights * c["routed_scaling_factor"]


def moe(c, w, p, x):
    """DeepseekV3MoE.forward; x [1, s, H]."""
    shape = x.shape
    flat = x.view(-1, shape[-1])
    idx, weights = router(c, w, p + "mlp.", flat)
    out = torch.zeros_like(flat)
    for i in range(c["n_routed_experts"]):
        hit = idx == i  # [n, k]
        tok = hit.any(-1).nonzero().flatten()
        if tok.numel() == 0:
            continue
        wt = (weights * hit).sum(-1)[tok]
        out = out.index_add(0, tok, mlp(w, p + f"mlp.experts.{i}.", flat[tok]) *
                            wt[:, None])
    out = out.view(shape)
    if c["n_shared_experts"]:
        out = out + mlp(w, p + "mlp.shared_experts.", x)
    return out


def forward(c, w, ids):
    """DeepseekV3ForCausalLM on one sequence ids [s] -> logits [s, V]."""
    s = ids.shape[0]
    x = w["model.embed_tokens.weight"][ids][None]
    cos, sin = rope_tables(c, torch.arange(s))
    eps = c["rms_norm_eps"]
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        x = x + attention(c, w, p + "self_attn.",
                          rms_norm(x, w[p + "input_layernorm.weight"], eps), cos, sin)
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        if l >= c["first_k_dense_replace"]:
            x = x + moe(c, w, p, h)
        else:
            x = x + mlp(w, p + "mlp.", h)
    x = rms_norm(x, w["model.norm.weight"], eps)
    return (x @ w["lm_head.weight"].T)[0]


# --- files -----------------------------------------------------------------

def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        if t.dtype == torch.bfloat16:
            dtype, raw = "BF16", t.view(torch.int16).numpy().tobytes()
        elif t.dtype == torch.float64:
            dtype, raw = "F64", t.numpy().tobytes()
        else:
            assert t.dtype == torch.int64
            dtype, raw = "I64", t.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in blobs:
            f.write(raw)


def generate(name, c, seed):
    gen = torch.Generator().manual_seed(seed)
    w = random_weights(c, gen)
    ids = torch.randint(0, c["vocab_size"], (sum(SEQ_LENS),), generator=gen)
    MARGINS.clear()
    BIAS_CHANGED[0] = 0
    params = {k: v.clone().requires_grad_(not k.endswith("correction_bias"))
              for k, v in w.items()}
    logits, logps, positions, start = [], [], [], 0
    for n in SEQ_LENS:
        seq = ids[start:start + n]
        lg = forward(c, params, seq)
        logits.append(lg)
        # Log-prob of each next token (last position: of token 0).
        labels = torch.cat([seq[1:], torch.zeros(1, dtype=torch.long)])
        logps.append(torch.log_softmax(lg, -1).gather(1, labels[:, None])[:, 0])
        positions.append(torch.arange(n))
        start += n
    logits, logps = torch.cat(logits), torch.cat(logps)
    logps.mean().backward()
    assert min(MARGINS) > 1e-6, (name, min(MARGINS))
    assert BIAS_CHANGED[0] > 0, name  # the bias must matter for selection
    out_dir = os.path.join(HERE, "testdata", name)
    os.makedirs(out_dir, exist_ok=True)
    config = dict(c)
    config.update(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3",
                  hidden_act="silu", torch_dtype="bfloat16", bos_token_id=0,
                  eos_token_id=1)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    write_safetensors(os.path.join(out_dir, "model.safetensors"),
                      {k: v.to(torch.bfloat16) for k, v in w.items()})
    golden = {"input_ids": ids, "position_ids": torch.cat(positions),
              "cu_seqlens": torch.tensor([0] + list(torch.tensor(SEQ_LENS).cumsum(0))),
              "logits": logits.detach(), "log_probs": logps.detach()}
    for t in GRAD_TENSORS:
        golden["grad." + t] = params[t].grad
    write_safetensors(os.path.join(HERE, "testdata", name + "_golden.safetensors"),
                      golden)
    print(f"{name}: min selection margin {min(MARGINS):.3g}, "
          f"{BIAS_CHANGED[0]} tokens routed differently because of the bias")


if __name__ == "__main__":
    for i, (name, c) in enumerate(VARIANTS.items()):
        generate(name, c, 1234 + i)
