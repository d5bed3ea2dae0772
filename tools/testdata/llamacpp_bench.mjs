// llama.cpp (the npm package node-llama-cpp, CPU build) throughput on a GGUF
// file, for tools/bench_vs_llamacpp.sh: S sequences of P random prompt
// tokens each are prefilled together (one batched evaluation), then each
// continues greedily for G tokens, all sequences decoding in the same
// batches (node-llama-cpp batches the sequences' pending tokens into one
// llama_decode). Flash attention off, f32 K/V cache. Prints one JSON line
// {"seqs", "prefill_tok_s", "decode_tok_s", "generated", "forward_tok_s",
// "forward_head_tok_s"}: forward_tok_s feeds up to 32 more fixed tokens per
// sequence, one batched step at a time, without sampling; llama.cpp then
// requests no logits, so this skips the LM head (llama.cpp's decoder
// layers alone). forward_head_tok_s does the same steps asking for each
// sequence's next token (controlledEvaluate, greedy): the forward with the
// LM head and llama.cpp's native sampler, without node-llama-cpp's
// per-token generator loop.
// usage: node llamacpp_bench.mjs FILE.gguf SEQS PROMPT GEN THREADS VOCAB SEED
import { join } from 'node:path'

const root = process.env.NPM_ROOT || '/usr/local/lib/node_modules'
const { getLlama } = await import(join(root, 'node-llama-cpp/dist/index.js'))
const [modelPath, seqsArg, promptArg, genArg, threadsArg, vocabArg, seedArg] =
  process.argv.slice(2)
const S = Number(seqsArg), P = Number(promptArg), G = Number(genArg)
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' })
const model = await llama.loadModel({ modelPath })
const context = await model.createContext({
  sequences: S,
  contextSize: S * (P + 2 * G + 8),
  batchSize: Math.min(S * P, 8192),
  threads: Number(threadsArg),
  flashAttention: false,
  experimentalKvCacheKeyType: 'F32',
  experimentalKvCacheValueType: 'F32',
})
// Deterministic random prompts (xorshift) below vocab - 512 (clear of the
// special tokens at the end).
let state = BigInt(seedArg || 1) * 2654435761n + 1n
const vocab = Number(vocabArg)
function next () {
  state ^= (state << 13n) & 0xffffffffffffffffn
  state ^= state >> 7n
  state ^= (state << 17n) & 0xffffffffffffffffn
  return Number(state % BigInt(Math.max(2, vocab - 512)))
}
const seqs = [], prompts = []
for (let s = 0; s < S; ++s) {
  seqs.push(context.getSequence())
  prompts.push(Array.from({ length: P }, next))
}
let t0 = performance.now()
await Promise.all(seqs.map((seq, s) =>
  seq.evaluateWithoutGeneratingNewTokens(prompts[s].slice(0, P - 1))))
const prefill = performance.now() - t0
let generated = 0
t0 = performance.now()
await Promise.all(seqs.map(async (seq, s) => {
  let n = 0
  for await (const token of seq.evaluate([prompts[s][P - 1]],
    { temperature: 0, yieldEogToken: true })) {
    void token
    if (++n >= G) break
  }
  generated += n
}))
const decode = performance.now() - t0
// Fixed-token steps: every sequence appends one token per step, all S in
// one batch, no sampling.
const steps = Math.min(G, 32)
t0 = performance.now()
for (let i = 0; i < steps; ++i) {
  await Promise.all(seqs.map((seq, s) =>
    seq.evaluateWithoutGeneratingNewTokens([prompts[s][i % P]])))
}
const forward = performance.now() - t0
// The same with the LM head: each sequence asks for its next token.
t0 = performance.now()
for (let i = 0; i < steps; ++i) {
  await Promise.all(seqs.map((seq, s) => seq.controlledEvaluate([
    [prompts[s][(i + 7) % P], { generateNext: { token: true, options: { temperature: 0 } } }]])))
}
const forwardHead = performance.now() - t0
console.log(JSON.stringify({
  seqs: S,
  prefill_tok_s: (S * (P - 1)) / (prefill / 1000),
  decode_tok_s: generated / (decode / 1000),
  generated,
  forward_tok_s: (S * steps) / (forward / 1000),
  forward_head_tok_s: (S * steps) / (forwardHead / 1000),
}))
await context.dispose()
await model.dispose()
await llama.dispose()
