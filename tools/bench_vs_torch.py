#!/usr/bin/python3
"""Training fwd+bwd throughput: the project against PyTorch eager (issue #20).

The same qwen2-30m model (hidden 512, 8 layers, 8/2 heads, intermediate 1408,
vocab 16384, q/k/v bias, tied embeddings, fp32) and the same step: packed
2 x 256 tokens, forward, mean token log-prob loss, backward. The project's
side is //verl/models:model_bench's BM_ForwardBackward (fp32, 3 iterations,
its second repetition), run as a subprocess; the PyTorch side is a plain eager implementation below on
Debian's python3-torch (the same LibTorch 1.13 and BLIS). Runs them in
interleaved pairs (project, eager, project, ...) and prints each pair, the
median ratio, and both sides' model FLOP rate (verl's formula: 6 x dense
params x tokens + attention) as a fraction of the fp32 GEMM peak measured
in this process (2048^3 matmul) beside each pair.

With --threads=1 each pair also prints the ratio of CPU seconds per step
(the project's main-thread CPU time from Google Benchmark, the eager step's
time.thread_time()): on a shared machine this counts the work each side
does, not the time it waited for a core.

usage: tools/bench_vs_torch.py (Debian python3: /usr/bin/python3) [--pairs=5] [--threads=2] [--iters=3]
       [--model_bench=bazel-bin/verl/models/model_bench]
Skips with one line (exit 0) when torch is not importable.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

# BLIS (Debian's OpenMP build) reads its thread count when it loads, and
# spinning OpenMP waits collapse on a shared machine: set both before torch.
_threads = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--threads=")), "2")
os.environ.setdefault("BLIS_NUM_THREADS", _threads)
os.environ.setdefault("OMP_WAIT_POLICY", "passive")


# Both sides run the same BLIS kernels (tools/blis_arch.py).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blis_arch import set_blis_arch  # noqa: E402

set_blis_arch()

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("bench_vs_torch: python3 torch not importable (apt-get install python3-torch); skipped")
    sys.exit(0)

# qwen2-30m (verl/models/presets.cc).
VOCAB, HIDDEN, INTER, LAYERS, HEADS, KV_HEADS = 16384, 512, 1408, 8, 8, 2
HEAD_DIM = HIDDEN // HEADS
THETA, EPS = 1e6, 1e-6
SEQS, LEN = 2, 256


class RMSNorm(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = RMSNorm(HIDDEN)
        self.q_proj = torch.nn.Linear(HIDDEN, HEADS * HEAD_DIM)
        self.k_proj = torch.nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM)
        self.v_proj = torch.nn.Linear(HIDDEN, KV_HEADS * HEAD_DIM)
        self.o_proj = torch.nn.Linear(HEADS * HEAD_DIM, HIDDEN, bias=False)
        self.post_attention_layernorm = RMSNorm(HIDDEN)
        self.gate_proj = torch.nn.Linear(HIDDEN, INTER, bias=False)
        self.up_proj = torch.nn.Linear(HIDDEN, INTER, bias=False)
        self.down_proj = torch.nn.Linear(INTER, HIDDEN, bias=False)

    def forward(self, h, cos, sin, mask):
        b, t, _ = h.shape
        x = self.input_layernorm(h)
        q = self.q_proj(x).view(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.k_proj(x).view(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.v_proj(x).view(b, t, KV_HEADS, HEAD_DIM).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
        v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(HEAD_DIM) + mask
        o = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, HIDDEN)
        h = h + self.o_proj(o)
        x = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rot * sin


class Qwen2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(VOCAB, HIDDEN)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(LAYERS))
        self.norm = RMSNorm(HIDDEN)
        for p in self.parameters():
            if p.dim() > 1:
                torch.nn.init.normal_(p, std=0.02)

    def forward(self, ids):
        t = ids.shape[1]
        inv = 1.0 / (THETA ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
        freqs = torch.outer(torch.arange(t).float(), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.full((t, t), float("-inf")).triu(1)
        h = self.embed_tokens(ids)
        for layer in self.layers:
            h = layer(h, cos, sin, mask)
        return self.norm(h) @ self.embed_tokens.weight.t()  # tied head


def eager_tokens_per_s(model, ids, labels, iters):
    def step():
        model.zero_grad(set_to_none=True)
        logits = model(ids)
        lp = logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1))
        (-lp.mean()).backward()
    step()  # warm-up
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(iters):
        step()
    return (ids.numel() * iters / (time.perf_counter() - t0),
            ids.numel() * iters / (time.thread_time() - c0))


def gemm_peak():
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    a @ b
    best = min(timed(lambda: a @ b) for _ in range(3))
    return 2 * 2048 ** 3 / best / 1e9


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def project(binary, iters, threads):
    out = subprocess.run(
        [binary, "--benchmark_filter=BM_ForwardBackward/bf16:0",
         "--benchmark_format=json", "--benchmark_repetitions=2"],
        check=True, capture_output=True, text=True,
        env={**os.environ, "VERL_BENCH_THREADS": str(threads),
             "BLIS_NUM_THREADS": str(threads)}).stdout
    # The second repetition: warm (the first includes the first-touch
    # allocations the eager side spends in its warm-up step).
    bench = [b for b in json.loads(out)["benchmarks"]
             if b.get("run_type") == "iteration"][-1]
    cpu_s = bench["cpu_time"] * {"ms": 1e-3, "us": 1e-6, "ns": 1e-9, "s": 1.0}[bench["time_unit"]]
    cpu_tok = SEQS * LEN / cpu_s
    return bench["tokens/s"], bench["model_GFLOP/s"], bench["gemm_fp32_GFLOP/s"], cpu_tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=3, help="eager timed steps")
    ap.add_argument("--model_bench", default="bazel-bin/verl/models/model_bench")
    a = ap.parse_args()
    if not os.path.exists(a.model_bench):
        print(f"bench_vs_torch: {a.model_bench} missing (bazel build //verl/models:model_bench)")
        sys.exit(2)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Qwen2()
    ids = torch.randint(0, VOCAB, (SEQS, LEN))
    labels = torch.roll(ids, -1, dims=1)
    params = sum(p.numel() for p in model.parameters())
    print(f"qwen2-30m eager: {params / 1e6:.1f}M parameters, {SEQS} x {LEN} tokens, "
          f"{a.threads} threads, torch {torch.__version__}, "
          f"BLIS_ARCH_TYPE={os.environ.get('BLIS_ARCH_TYPE', 'unset')}")
    ratios, ours_frac, eager_frac, cpu_ratios = [], [], [], []
    for i in range(a.pairs):
        o_tok, o_gflops, o_peak, o_cpu_tok = project(a.model_bench, a.iters, a.threads)
        e_tok, e_cpu_tok = eager_tokens_per_s(model, ids, labels, a.iters)
        cpu_ratios.append(o_cpu_tok / e_cpu_tok)
        peak = gemm_peak()
        flops_per_token = o_gflops / o_tok  # same model and formula
        ratios.append(o_tok / e_tok)
        ours_frac.append(o_gflops / peak)
        eager_frac.append(e_tok * flops_per_token / peak)
        load = open("/proc/loadavg").read().split()[:3]
        print(f"pair {i}: project {o_tok:.0f} tok/s ({o_gflops:.1f} GFLOP/s), eager "
              f"{e_tok:.0f} tok/s, ratio {o_tok / e_tok:.2f}x; GEMM peak {peak:.1f} "
              f"(project's own {o_peak:.1f}); load {' '.join(load)}"
              + (f"; CPU-time ratio {o_cpu_tok / e_cpu_tok:.2f}x" if a.threads == 1 else ""))
    print(f"median ratio project / PyTorch eager: {statistics.median(ratios):.2f}x "
          f"[{min(ratios):.2f}-{max(ratios):.2f}]; of the GEMM peak: project "
          f"{100 * statistics.median(ours_frac):.0f}%, eager "
          f"{100 * statistics.median(eager_frac):.0f}%")
    if a.threads == 1:
        print(f"median CPU-time ratio: {statistics.median(cpu_ratios):.2f}x "
              f"[{min(cpu_ratios):.2f}-{max(cpu_ratios):.2f}]")


if __name__ == "__main__":
    main()
