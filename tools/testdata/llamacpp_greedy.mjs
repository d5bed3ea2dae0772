// llama.cpp (through the npm package node-llama-cpp, CPU build) on a GGUF
// file: tokenizes each prompt and continues it greedily, printing one JSON
// line per prompt {"prompt_token_ids", "token_ids", "probs"} (probs: the
// probability llama.cpp gives each chosen token). An independent consumer
// for export_gguf_test. usage: node llamacpp_greedy.mjs FILE.gguf PROMPTS.json N
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

const root = process.env.NPM_ROOT || '/usr/local/lib/node_modules'
const { getLlama } = await import(join(root, 'node-llama-cpp/dist/index.js'))
const [modelPath, promptsPath, n] = process.argv.slice(2)
const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' })
const model = await llama.loadModel({ modelPath })
const prompts = JSON.parse(readFileSync(promptsPath, 'utf8'))
const context = await model.createContext({ contextSize: 256, threads: 1 })
const sequence = context.getSequence()
for (const prompt of prompts) {
  const ids = model.tokenize(prompt, false)
  const out = { prompt_token_ids: Array.from(ids), token_ids: [], probs: [] }
  const gen = sequence.evaluateWithMetadata(ids, { confidence: true },
    { temperature: 0, yieldEogToken: true })
  for await (const { token, confidence } of gen) {
    out.token_ids.push(token)
    out.probs.push(confidence)
    if (out.token_ids.length >= Number(n)) break
  }
  await sequence.clearHistory()
  console.log(JSON.stringify(out))
}
await context.dispose()
await model.dispose()
await llama.dispose()
