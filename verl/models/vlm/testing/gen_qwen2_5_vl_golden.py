#!/usr/bin/python3
"""Golden logits for verl/models/vlm's Qwen2.5-VL and Qwen2-VL, from an
independent float64 reference written from HF's modeling_qwen2_5_vl.py and
modeling_qwen2_vl.py equations.

Run with Debian's /usr/bin/python3 (python3-torch, numpy):
    /usr/bin/python3 verl/models/vlm/testing/gen_qwen2_5_vl_golden.py
Weights and pixel values come from a counter-based hash (splitmix64 of the
tensor name's FNV-1a hash + element index) that the C++ test reproduces, so no
weights are checked in. Writes testdata/<set>_golden.json and
testdata/<set>_case*.f64 (logits [T, vocab], float64 little endian) for the
sets qwen2_5_vl and qwen2_vl.

Qwen2-VL's tower differs from Qwen2.5-VL's: LayerNorm (with bias, eps 1e-6)
for norm1/norm2 and the merger's ln_q, an MLP fc2(act(fc1(x))) with hidden
int(embed_dim * mlp_ratio) and act = ACT2FN[hidden_act] (quick_gelu:
x * sigmoid(1.702 x)), no window attention (every block attends over each
whole image, no window_index reordering); vision_config names the tower width
embed_dim and the merger's output hidden_size. The language model, M-RoPE and
get_rope_index (for images) are the same.
"""
import json
import math
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata")
M64 = (1 << 64) - 1

CONFIG = {
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "model_type": "qwen2_5_vl",
    "vocab_size": 64, "hidden_size": 64, "intermediate_size": 96,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 4096,
    "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "float32",
    "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 2,
    "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
    "vision_start_token_id": 60, "vision_end_token_id": 61,
    "image_token_id": 62, "video_token_id": 63, "bos_token_id": 0, "eos_token_id": 59,
    "vision_config": {
        "depth": 4, "hidden_size": 32, "num_heads": 2, "intermediate_size": 48,
        "patch_size": 14, "temporal_patch_size": 2, "spatial_merge_size": 2,
        "window_size": 56, "fullatt_block_indexes": [1, 3], "out_hidden_size": 64,
        "in_chans": 3, "hidden_act": "silu", "tokens_per_second": 2,
    },
}
CONFIG_QWEN2_VL = dict(CONFIG)
CONFIG_QWEN2_VL.update({
    "architectures": ["Qwen2VLForConditionalGeneration"],
    "model_type": "qwen2_vl",
    "vision_token_id": 151654,  # an unknown key to the reader: kept verbatim
    "vision_config": {
        "depth": 3, "embed_dim": 32, "hidden_size": 64, "num_heads": 2,
        "mlp_ratio": 1.5, "patch_size": 14, "temporal_patch_size": 2,
        "spatial_merge_size": 2, "in_chans": 3, "hidden_act": "quick_gelu",
    },
})
# (text before, [(grid_thw, text after)]): one small image, one larger image
# (windows padded on both axes), two images in one prompt.
CASES = [
    (5, [((1, 4, 6), 6)]),
    (3, [((1, 10, 8), 4)]),
    (4, [((1, 4, 6), 3), ((1, 6, 4), 5)]),
]


def fnv1a64(s):
    h = 0xcbf29ce484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001b3) & M64
    return h


def hash_uniform(name, n):
    """n values in [-1, 1): splitmix64(fnv1a64(name) + i) >> 11, scaled."""
    seed = fnv1a64(name)
    x = (np.arange(n, dtype=np.uint64) + np.uint64(seed)) * np.uint64(1)
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (2.0 ** -52) - 1.0


def hash_tensor(name, shape):
    """Weight rule shared with the C++ test: norms 1 + 0.1u, biases 0.1u,
    matrices u / sqrt(fan_in)."""
    n = int(np.prod(shape))
    u = hash_uniform(name, n)
    if name.endswith("norm.weight") or name.endswith("norm1.weight") or \
            name.endswith("norm2.weight") or name.endswith("ln_q.weight"):
        v = 1.0 + 0.1 * u
    elif name.endswith(".bias"):
        v = 0.1 * u
    else:
        v = u / math.sqrt(n // shape[0])
    return torch.tensor(v.reshape(shape), dtype=torch.float64)


def is_qwen2_vl(c):
    return c["model_type"] == "qwen2_vl"


def vision_dims(c):
    """(tower width, MLP hidden, merger output) from either vision_config."""
    v = c["vision_config"]
    if is_qwen2_vl(c):
        return v["embed_dim"], int(v["embed_dim"] * v["mlp_ratio"]), v["hidden_size"]
    return v["hidden_size"], v["intermediate_size"], v["out_hidden_size"]


def param_shapes(c):
    v = c["vision_config"]
    H, I = c["hidden_size"], c["intermediate_size"]
    hd = H // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * hd
    vh, vi, vo = vision_dims(c)
    mh = vh * v["spatial_merge_size"] ** 2
    s = {"visual.patch_embed.proj.weight": [vh, 3, v["temporal_patch_size"], v["patch_size"], v["patch_size"]]}
    for b in range(v["depth"]):
        p = "visual.blocks.%d." % b
        s.update({p + "norm1.weight": [vh], p + "norm2.weight": [vh],
                  p + "attn.qkv.weight": [3 * vh, vh], p + "attn.qkv.bias": [3 * vh],
                  p + "attn.proj.weight": [vh, vh], p + "attn.proj.bias": [vh]})
        if is_qwen2_vl(c):
            s.update({p + "norm1.bias": [vh], p + "norm2.bias": [vh],
                      p + "mlp.fc1.weight": [vi, vh], p + "mlp.fc1.bias": [vi],
                      p + "mlp.fc2.weight": [vh, vi], p + "mlp.fc2.bias": [vh]})
        else:
            s.update({p + "mlp.gate_proj.weight": [vi, vh], p + "mlp.gate_proj.bias": [vi],
                      p + "mlp.up_proj.weight": [vi, vh], p + "mlp.up_proj.bias": [vi],
                      p + "mlp.down_proj.weight": [vh, vi], p + "mlp.down_proj.bias": [vh]})
    s.update({"visual.merger.ln_q.weight": [vh],
              "visual.merger.mlp.0.weight": [mh, mh], "visual.merger.mlp.0.bias": [mh],
              "visual.merger.mlp.2.weight": [vo, mh],
              "visual.merger.mlp.2.bias": [vo]})
    if is_qwen2_vl(c):
        s["visual.merger.ln_q.bias"] = [vh]
    s["model.embed_tokens.weight"] = [c["vocab_size"], H]
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        s.update({p + "input_layernorm.weight": [H], p + "post_attention_layernorm.weight": [H],
                  p + "self_attn.q_proj.weight": [H, H], p + "self_attn.q_proj.bias": [H],
                  p + "self_attn.k_proj.weight": [kv, H], p + "self_attn.k_proj.bias": [kv],
                  p + "self_attn.v_proj.weight": [kv, H], p + "self_attn.v_proj.bias": [kv],
                  p + "self_attn.o_proj.weight": [H, H],
                  p + "mlp.gate_proj.weight": [I, H], p + "mlp.up_proj.weight": [I, H],
                  p + "mlp.down_proj.weight": [H, I]})
    s["model.norm.weight"] = [H]
    s["lm_head.weight"] = [c["vocab_size"], H]
    return s


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def layer_norm(x, w, b, eps):
    """nn.LayerNorm over the last dim (biased variance)."""
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps) * w + b


ACT2FN = {
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
    "gelu": lambda x: 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0))),
    "silu": lambda x: x * torch.sigmoid(x),
}


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


# ---- vision tower (Qwen2_5_VisionTransformerPretrainedModel) ----------------

def rot_pos_emb(grid_thw, head_dim, sms):
    dim = head_dim // 2
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    pos = []
    for t, h, w in grid_thw:
        hpos = torch.arange(h).unsqueeze(1).expand(-1, w)
        hpos = hpos.reshape(h // sms, sms, w // sms, sms).permute(0, 2, 1, 3).flatten()
        wpos = torch.arange(w).unsqueeze(0).expand(h, -1)
        wpos = wpos.reshape(h // sms, sms, w // sms, sms).permute(0, 2, 1, 3).flatten()
        pos.append(torch.stack([hpos, wpos], dim=-1).repeat(t, 1))
    pos = torch.cat(pos, 0)
    max_grid = max(max(h, w) for _, h, w in grid_thw)
    full = torch.outer(torch.arange(max_grid, dtype=torch.float64), inv_freq)
    return full[pos].flatten(1)


def window_index(grid_thw, window_size, sms, patch):
    vmws = window_size // sms // patch
    index, cu, base = [], [0], 0
    for t, h, w in grid_thw:
        lh, lw = h // sms, w // sms
        idx = torch.arange(t * lh * lw).reshape(t, lh, lw)
        ph, pw = vmws - lh % vmws, vmws - lw % vmws
        nh, nw = (lh + ph) // vmws, (lw + pw) // vmws
        padded = torch.nn.functional.pad(idx, (0, pw, 0, ph), "constant", -100)
        padded = padded.reshape(t, nh, vmws, nw, vmws).permute(0, 1, 3, 2, 4).reshape(t, nh * nw, vmws, vmws)
        seqlens = (padded != -100).sum([2, 3]).reshape(-1)
        padded = padded.reshape(-1)
        index.append(padded[padded != -100] + base)
        cu.extend((seqlens.cumsum(0) * sms * sms + cu[-1]).tolist())
        base += t * lh * lw
    return torch.cat(index), torch.unique_consecutive(torch.tensor(cu))


def block_attention(x, cu, W, p, heads):
    T, D = x.shape
    hd = D // heads
    qkv = (x @ W[p + "attn.qkv.weight"].T + W[p + "attn.qkv.bias"]).reshape(T, 3, heads, hd)
    q, k, v = qkv.permute(1, 0, 2, 3).unbind(0)
    return q, k, v


def vision_forward(pixel_values, grid_thw, W, c):
    v = c["vision_config"]
    sms, D, heads = v["spatial_merge_size"], v["hidden_size"], v["num_heads"]
    hd = D // heads
    x = pixel_values @ W["visual.patch_embed.proj.weight"].reshape(D, -1).T
    rot = rot_pos_emb(grid_thw, hd, sms)
    widx, cu_win = window_index(grid_thw, v["window_size"], sms, v["patch_size"])
    T = x.shape[0]
    unit = sms * sms
    x = x.reshape(T // unit, unit, -1)[widx].reshape(T, -1)
    rot = rot.reshape(T // unit, unit, -1)[widx].reshape(T, -1)
    emb = torch.cat((rot, rot), -1)
    cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
    cu_full = torch.tensor([0] + list(np.cumsum([t * h * w for t, h, w in grid_thw])))
    for b in range(v["depth"]):
        p = "visual.blocks.%d." % b
        cu = cu_full if b in v["fullatt_block_indexes"] else cu_win
        h = rms_norm(x, W[p + "norm1.weight"], 1e-6)
        q, k, vv = block_attention(h, cu, W, p, heads)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        mask = torch.full((T, T), float("-inf"), dtype=torch.float64)
        for i in range(1, len(cu)):
            mask[cu[i - 1]:cu[i], cu[i - 1]:cu[i]] = 0
        s = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd) + mask
        o = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vv).reshape(T, D)
        x = x + o @ W[p + "attn.proj.weight"].T + W[p + "attn.proj.bias"]
        h = rms_norm(x, W[p + "norm2.weight"], 1e-6)
        g = torch.nn.functional.silu(h @ W[p + "mlp.gate_proj.weight"].T + W[p + "mlp.gate_proj.bias"])
        u = h @ W[p + "mlp.up_proj.weight"].T + W[p + "mlp.up_proj.bias"]
        x = x + (g * u) @ W[p + "mlp.down_proj.weight"].T + W[p + "mlp.down_proj.bias"]
    h = rms_norm(x, W["visual.merger.ln_q.weight"], 1e-6).reshape(-1, D * unit)
    h = torch.nn.functional.gelu(h @ W["visual.merger.mlp.0.weight"].T + W["visual.merger.mlp.0.bias"])
    h = h @ W["visual.merger.mlp.2.weight"].T + W["visual.merger.mlp.2.bias"]
    return h[torch.argsort(widx)]


# ---- vision tower (Qwen2VisionTransformerPretrainedModel) --------------------

def vision_forward_qwen2(pixel_values, grid_thw, W, c):
    """Qwen2-VL: LayerNorm blocks, fc1-act-fc2 MLP, attention over each image
    frame (cu_seqlens = h*w repeated t times), no window reordering."""
    v = c["vision_config"]
    sms, D, heads = v["spatial_merge_size"], v["embed_dim"], v["num_heads"]
    hd = D // heads
    act = ACT2FN[v.get("hidden_act", "quick_gelu")]
    x = pixel_values @ W["visual.patch_embed.proj.weight"].reshape(D, -1).T
    rot = rot_pos_emb(grid_thw, hd, sms)
    emb = torch.cat((rot, rot), -1)
    cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
    T = x.shape[0]
    cu = [0]
    for t, h, w in grid_thw:
        for _ in range(t):
            cu.append(cu[-1] + h * w)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64)
    for i in range(1, len(cu)):
        mask[cu[i - 1]:cu[i], cu[i - 1]:cu[i]] = 0
    for b in range(v["depth"]):
        p = "visual.blocks.%d." % b
        h = layer_norm(x, W[p + "norm1.weight"], W[p + "norm1.bias"], 1e-6)
        q, k, vv = block_attention(h, cu, W, p, heads)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        s = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd) + mask
        o = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vv).reshape(T, D)
        x = x + o @ W[p + "attn.proj.weight"].T + W[p + "attn.proj.bias"]
        h = layer_norm(x, W[p + "norm2.weight"], W[p + "norm2.bias"], 1e-6)
        h = act(h @ W[p + "mlp.fc1.weight"].T + W[p + "mlp.fc1.bias"])
        x = x + h @ W[p + "mlp.fc2.weight"].T + W[p + "mlp.fc2.bias"]
    unit = sms * sms
    h = layer_norm(x, W["visual.merger.ln_q.weight"], W["visual.merger.ln_q.bias"], 1e-6)
    h = h.reshape(-1, D * unit)
    h = ACT2FN["gelu"](h @ W["visual.merger.mlp.0.weight"].T + W["visual.merger.mlp.0.bias"])
    return h @ W["visual.merger.mlp.2.weight"].T + W["visual.merger.mlp.2.bias"]


# ---- language model with M-RoPE -------------------------------------------

def rope_index(ids, grid_thw, c):
    """get_rope_index for one sequence of images (no video, no padding)."""
    sms = c["vision_config"]["spatial_merge_size"]
    img = c["image_token_id"]
    parts, st = [], 0
    for t, h, w in grid_thw:
        ed = ids.index(img, st)
        lt, lh, lw = t, h // sms, w // sms
        st_idx = parts[-1].max() + 1 if parts else 0
        parts.append(torch.arange(ed - st).view(1, -1).expand(3, -1) + st_idx)
        t_idx = (torch.arange(lt).view(-1, 1).expand(-1, lh * lw) * 0).flatten()  # images: second_per_grid_t = 0
        h_idx = torch.arange(lh).view(1, -1, 1).expand(lt, -1, lw).flatten()
        w_idx = torch.arange(lw).view(1, 1, -1).expand(lt, lh, -1).flatten()
        parts.append(torch.stack([t_idx, h_idx, w_idx]) + (ed - st) + st_idx)
        st = ed + lt * lh * lw
    if st < len(ids):
        st_idx = parts[-1].max() + 1 if parts else 0
        parts.append(torch.arange(len(ids) - st).view(1, -1).expand(3, -1) + st_idx)
    return torch.cat(parts, 1)


def text_forward(embeds, pos, W, c):
    H, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = H // nh
    T = embeds.shape[0]
    inv = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = pos.to(torch.float64).unsqueeze(-1) * inv  # [3, T, hd/2]
    emb = torch.cat((freqs, freqs), -1)  # [3, T, hd]
    sec = c["rope_scaling"]["mrope_section"] * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(emb.cos().split(sec, -1))], -1).unsqueeze(1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(emb.sin().split(sec, -1))], -1).unsqueeze(1)
    causal = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    x = embeds
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        h = rms_norm(x, W[p + "input_layernorm.weight"], c["rms_norm_eps"])
        q = (h @ W[p + "self_attn.q_proj.weight"].T + W[p + "self_attn.q_proj.bias"]).reshape(T, nh, hd)
        k = (h @ W[p + "self_attn.k_proj.weight"].T + W[p + "self_attn.k_proj.bias"]).reshape(T, nkv, hd)
        v = (h @ W[p + "self_attn.v_proj.weight"].T + W[p + "self_attn.v_proj.bias"]).reshape(T, nkv, hd)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, 1)
        v = v.repeat_interleave(nh // nkv, 1)
        s = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd) + causal
        o = torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v).reshape(T, H)
        x = x + o @ W[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], c["rms_norm_eps"])
        g = torch.nn.functional.silu(h @ W[p + "mlp.gate_proj.weight"].T)
        x = x + (g * (h @ W[p + "mlp.up_proj.weight"].T)) @ W[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, W["model.norm.weight"], c["rms_norm_eps"])
    return x @ W["lm_head.weight"].T


def write_set(prefix, c):
    shapes = param_shapes(c)
    W = {n: hash_tensor(n, s) for n, s in shapes.items()}
    sms = c["vision_config"]["spatial_merge_size"]
    tower = vision_forward_qwen2 if is_qwen2_vl(c) else vision_forward
    cases = []
    for k, (before, images) in enumerate(CASES):
        rng = np.random.default_rng(k)
        ids = rng.integers(1, 59, before).tolist()
        grids = []
        for grid, after in images:
            n = grid[0] * grid[1] * grid[2] // (sms * sms)
            ids += [c["vision_start_token_id"]] + [c["image_token_id"]] * n + [c["vision_end_token_id"]]
            ids += rng.integers(1, 59, after).tolist()
            grids.append(list(grid))
        patches = sum(t * h * w for t, h, w in grids)
        pix_name = "pixel_values/case%d" % k
        pix = torch.tensor(hash_uniform(pix_name, patches * 1176).reshape(patches, 1176) * 2.0)
        image_embeds = tower(pix, grids, W, c)
        embeds = W["model.embed_tokens.weight"][torch.tensor(ids)].clone()
        mask = torch.tensor(ids) == c["image_token_id"]
        embeds[mask] = image_embeds
        pos = rope_index(ids, grids, c)
        logits = text_forward(embeds, pos, W, c)
        fname = "%s_case%d.f64" % (prefix, k)
        with open(os.path.join(OUT, fname), "wb") as f:
            f.write(logits.numpy().astype("<f8").tobytes())
        cases.append({"input_ids": ids, "image_grid_thw": grids, "pixel_values": pix_name,
                      "pixel_scale": 2.0, "position_ids": pos.tolist(), "logits": fname,
                      "image_embeds_sum": float(image_embeds.sum()),
                      "image_embeds_row0": image_embeds[0].tolist()})
    golden = {"config": c, "params": {n: s for n, s in shapes.items()}, "cases": cases}
    with open(os.path.join(OUT, "%s_golden.json" % prefix), "w") as f:
        json.dump(golden, f, indent=1)


def main():
    write_set("qwen2_5_vl", CONFIG)
    write_set("qwen2_vl", CONFIG_QWEN2_VL)


if __name__ == "__main__":
    main()
