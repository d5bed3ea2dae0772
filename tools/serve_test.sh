#!/usr/bin/env bash
# //tools:serve end to end, driven by the official `openai` npm client
# (tools/setup.sh installs openai@5): a tiny Qwen2 HF folder from
# //tools:init_model with Qwen2.5's chat template (its tool prompt), served on
# a free port; tools/testdata/openai_client.mjs checks models, completions,
# chat, streaming, the tools -> prompt path, error objects and 32 concurrent
# greedy clients against sequential ones. Then bad flags: one line, exit 2.
set -euo pipefail
d="$TEST_TMPDIR"
tools/init_model --preset=tiny-qwen2 --seed=7 --output_dir="$d/m" >/dev/null
template=verl/models/tokenizer/testdata/qwen2_5_chat_template.jinja
python3 - "$d/m/tokenizer_config.json" "$template" <<'PY'
import json, sys
path, template = sys.argv[1], open(sys.argv[2]).read()
config = json.load(open(path))
config["chat_template"] = template
json.dump(config, open(path, "w"), indent=2)
PY

# Bad flags fail fast with one line.
set +e
msg=$(tools/serve --model_path="$d/m" --preset=tiny-qwen2 2>&1); rc=$?
set -e
[ "$rc" = 2 ] && echo "$msg" | grep -q "exactly one of"
set +e
msg=$(tools/serve --preset=tiny-qwen2 --max_concurrent_requests=0 2>&1); rc=$?
set -e
[ "$rc" = 2 ] && echo "$msg" | grep -q "must be >= 1"

if ! command -v node >/dev/null || [ ! -d /usr/local/lib/node_modules/openai ]; then
  echo "serve_test: the openai npm client is missing (tools/setup.sh installs it); client checks skipped"
  exit 0
fi

tools/serve --model_path="$d/m" --served_model_name=tiny --port=0 \
  --max_model_len=2048 --kv_cache_mb=64 --threads=1 > "$d/serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
port=""
for _ in $(seq 1 600); do
  port=$(sed -n 's|^serve: listening on http://127.0.0.1:\([0-9]*\)$|\1|p' "$d/serve.log")
  [ -n "$port" ] && break
  kill -0 $pid 2>/dev/null || { cat "$d/serve.log"; exit 1; }
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not start"; cat "$d/serve.log"; exit 1; }
node tools/testdata/openai_client.mjs "http://127.0.0.1:$port/v1" tiny "$template"
# SIGTERM stops it cleanly.
kill -TERM $pid
wait $pid
grep -q "serve: stopped" "$d/serve.log"
trap - EXIT
