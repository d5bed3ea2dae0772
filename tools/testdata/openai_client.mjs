// The official `openai` npm client (installed by tools/setup.sh) against a
// running //tools:serve: models, completions, chat, streaming, the tools ->
// chat template path, error objects, and 32 concurrent greedy clients that
// must get what sequential requests got. Exits non-zero on the first
// mismatch. usage: node openai_client.mjs BASE_URL MODEL CHAT_TEMPLATE.jinja
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import assert from 'node:assert/strict'

const root = process.env.NPM_ROOT || '/usr/local/lib/node_modules'
const { default: OpenAI } = await import(join(root, 'openai/index.mjs'))
const { Template } = await import(join(root, '@huggingface/jinja/dist/index.js'))
const [baseURL, model, templatePath] = process.argv.slice(2)
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120000 })

// models
const models = await client.models.list()
assert.deepEqual(models.data.map(m => m.id), [model])

// completions
const comp = await client.completions.create({
  model, prompt: 'What is 2+3? The answer is', max_tokens: 8, temperature: 0, logprobs: 1 })
assert.equal(comp.object, 'text_completion')
assert.equal(comp.choices.length, 1)
assert.ok(['stop', 'length'].includes(comp.choices[0].finish_reason))
assert.equal(comp.usage.completion_tokens, comp.choices[0].logprobs.tokens.length)
assert.equal(comp.usage.total_tokens, comp.usage.prompt_tokens + comp.usage.completion_tokens)
console.log('completions ok:', JSON.stringify(comp.choices[0].text))

// chat
const messages = [{ role: 'system', content: 'You are brief.' },
                  { role: 'user', content: 'Say hello.' }]
const chat = await client.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0 })
assert.equal(chat.object, 'chat.completion')
assert.equal(chat.choices[0].message.role, 'assistant')
assert.equal(typeof chat.choices[0].message.content, 'string')
console.log('chat ok:', JSON.stringify(chat.choices[0].message.content))

// streaming: the chunks concatenate to the non-streamed answer
const stream = await client.chat.completions.create({
  model, messages, max_tokens: 10, temperature: 0, stream: true,
  stream_options: { include_usage: true } })
let streamed = ''
let finish = null
let usage = null
let nchunks = 0
for await (const chunk of stream) {
  nchunks++
  if (chunk.usage) usage = chunk.usage
  for (const c of chunk.choices) {
    streamed += c.delta.content ?? ''
    if (c.finish_reason) finish = c.finish_reason
  }
}
assert.equal(streamed, chat.choices[0].message.content)
assert.equal(finish, chat.choices[0].finish_reason)
assert.deepEqual(usage, chat.usage)
const cstream = await client.completions.create({
  model, prompt: 'What is 2+3? The answer is', max_tokens: 8, temperature: 0, stream: true })
let ctext = ''
for await (const chunk of cstream) ctext += chunk.choices[0]?.text ?? ''
assert.equal(ctext, comp.choices[0].text)
console.log(`streaming ok: ${nchunks} chunks`)

// tools -> the chat template's tool prompt: the server's prompt equals the
// template rendered independently (@huggingface/jinja), shown by equal
// prompt token counts and equal greedy answers via /v1/completions.
const tools = [{ type: 'function', function: {
  name: 'calculator', description: 'Evaluates arithmetic.',
  parameters: { type: 'object', properties: { expr: { type: 'string' } }, required: ['expr'] } } }]
const toolMessages = [{ role: 'user', content: 'What is 17*23?' }]
const withTools = await client.chat.completions.create({
  model, messages: toolMessages, tools, max_tokens: 12, temperature: 0 })
const withoutTools = await client.chat.completions.create({
  model, messages: toolMessages, max_tokens: 12, temperature: 0 })
const rendered = new Template(readFileSync(templatePath, 'utf8')).render({
  messages: toolMessages, tools, add_generation_prompt: true,
  eos_token: '<|im_end|>', pad_token: '<|endoftext|>' })
assert.ok(rendered.includes('"name": "calculator"'))
const direct = await client.completions.create({ model, prompt: rendered, max_tokens: 12, temperature: 0 })
assert.equal(withTools.usage.prompt_tokens, direct.usage.prompt_tokens)
assert.ok(withTools.usage.prompt_tokens > withoutTools.usage.prompt_tokens + 50)
const answer = withTools.choices[0]
if (answer.finish_reason === 'tool_calls') {
  assert.ok(answer.message.tool_calls.length > 0)
} else {
  assert.equal(answer.message.content, direct.choices[0].text)
  assert.equal(answer.message.tool_calls, undefined)
}
console.log(`tools ok: prompt ${withTools.usage.prompt_tokens} tokens with tools, ` +
            `${withoutTools.usage.prompt_tokens} without`)

// errors: OpenAI error objects with their statuses
async function expectError (request, status, code) {
  try {
    await request()
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, String(e))
    assert.equal(e.status, status, e.message)
    if (code !== undefined) assert.equal(e.code, code)
    assert.equal(typeof e.error.message, 'string')
    return e
  }
  assert.fail(`expected HTTP ${status}`)
}
const notFound = await expectError(() => client.completions.create({ model: 'gpt-4', prompt: 'x' }), 404, 'model_not_found')
assert.ok(notFound instanceof OpenAI.NotFoundError)
const bad = await expectError(() => client.chat.completions.create({ model, messages, temperature: 5 }), 400)
assert.ok(bad instanceof OpenAI.BadRequestError)
assert.equal(bad.param, 'temperature')
await expectError(() => client.completions.create({ model, prompt: 'x'.repeat(5000) }), 400, 'context_length_exceeded')
await expectError(() => client.completions.create({ model, prompt: 'x', max_tokens: 100000 }), 400, 'context_length_exceeded')
console.log('errors ok')

// 32 concurrent greedy clients (half streaming) = sequential requests
const prompts = Array.from({ length: 32 }, (_, i) => `Request ${i}: count to ${i % 7}.`)
// Greedy texts of a tiny random model repeat themselves across prompts, so
// the chosen tokens' log-probs (prompt-dependent) are compared too.
async function run (prompt, i) {
  const req = { model, prompt, max_tokens: 16, temperature: 0, logprobs: 0 }
  if (i % 2 === 0) {
    const r = await client.completions.create(req)
    return { text: r.choices[0].text, lps: r.choices[0].logprobs.token_logprobs }
  }
  const s = await client.completions.create({ ...req, stream: true })
  const out = { text: '', lps: [] }
  for await (const chunk of s) {
    const c = chunk.choices[0]
    if (!c) continue
    out.text += c.text
    if (c.logprobs) out.lps.push(...c.logprobs.token_logprobs)
  }
  return out
}
const sequential = []
for (let i = 0; i < prompts.length; i++) sequential.push(await run(prompts[i], i))
const t0 = Date.now()
const concurrent = await Promise.all(prompts.map((p, i) => run(p, i)))
for (let i = 0; i < prompts.length; i++) {
  assert.equal(concurrent[i].text, sequential[i].text, `client ${i}`)
  assert.equal(concurrent[i].lps.length, sequential[i].lps.length)
  concurrent[i].lps.forEach((lp, t) =>
    assert.ok(Math.abs(lp - sequential[i].lps[t]) < 1e-4, `client ${i} token ${t}`))
}
assert.ok(new Set(sequential.map(r => r.lps[0].toFixed(6))).size > 8)
console.log(`concurrent ok: 32 clients in ${Date.now() - t0} ms, outputs equal sequential`)
