#!/bin/bash
# File: tools/sft_cli_test.sh
#
# //tools:sft end to end: bad keys, values and files print one line on stderr
# and exit 2; a 2-process run on the built-in arithmetic task (data from
# //tools:prepare_data) writes verl's metrics file and an HF folder, with the
# same losses as a 1-process run on the same rows as Parquet.
set -u
SFT=tools/sft
TMP="${TEST_TMPDIR:-$(mktemp -d)}"
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_error <needle> <args...>: exit code 2 and exactly one stderr line.
expect_error() {
  local needle="$1"; shift
  "$SFT" trainer.n_gpus_per_node=1 "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  [[ $rc -eq 2 ]] || fail "'$*' exited $rc, want 2: $(cat "$TMP/err")"
  [[ $(wc -l <"$TMP/err") -eq 1 ]] || fail "'$*' stderr is not one line: $(cat "$TMP/err")"
  grep -qF -- "$needle" "$TMP/err" || fail "'$*' stderr lacks '$needle': $(cat "$TMP/err")"
}

"$SFT" --config=examples/sft_tiny.textproto --print_config >"$TMP/cfg.txt" ||
  fail "--print_config exited $?"
grep -q 'lr_scheduler: "wsd"' "$TMP/cfg.txt" || fail "config not applied"

tools/prepare_data --task=arithmetic --output_dir="$TMP/data" --train_size=64 \
  --val_size=16 >/dev/null || fail "prepare_data exited $?"
tools/prepare_data --task=arithmetic --output_dir="$TMP/pq" --train_size=64 \
  --val_size=16 --format=parquet >/dev/null || fail "prepare_data parquet exited $?"

expect_error "data.nope" data.nope=1
expect_error "data.train_files" --config=examples/sft_tiny.textproto \
  "data.train_files=[$TMP/missing.jsonl]"
expect_error "optim.lr_scheduler" --config=examples/sft_tiny.textproto \
  "data.train_files=[$TMP/data/train.jsonl]" data.val_files=[] \
  optim.lr_scheduler=linear
expect_error "missing key 'question'" --config=examples/sft_tiny.textproto \
  "data.train_files=[$TMP/data/train.jsonl]" data.val_files=[] \
  data.prompt_key=question
expect_error "exceeds max_length 8" --config=examples/sft_tiny.textproto \
  "data.train_files=[$TMP/data/train.jsonl]" data.val_files=[] \
  data.max_length=8 data.truncation=error

export VERL_FILE_LOGGER_PATH="$TMP/metrics.jsonl"
"$SFT" --config=examples/sft_tiny.textproto \
  "data.train_files=[$TMP/data/train.jsonl]" "data.val_files=[$TMP/data/test.jsonl]" \
  trainer.n_gpus_per_node=2 trainer.total_training_steps=3 \
  "trainer.default_local_dir=$TMP/ckpt" "trainer.logger=[file]" \
  >"$TMP/run.out" 2>"$TMP/run.err" || fail "sft run exited $?: $(cat "$TMP/run.err")"
grep -q "sft: 3 steps" "$TMP/run.out" || fail "no summary: $(cat "$TMP/run.out")"
[[ $(wc -l <"$TMP/metrics.jsonl") -eq 3 ]] || fail "want 3 metric lines"
grep -q '"train/loss"' "$TMP/metrics.jsonl" || fail "no train/loss"
grep -q '"train/lr(1e-3)"' "$TMP/metrics.jsonl" || fail "no train/lr(1e-3)"
tail -1 "$TMP/metrics.jsonl" | grep -q '"val/loss"' || fail "no val/loss at the last step"
for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do
  [[ -f "$TMP/ckpt/global_step_3/huggingface/$f" ]] || fail "missing $f"
done

# One process gives the same losses as two (the loss is normalised by the
# global token count, and the global batch is the same), reading the same
# rows from Parquet (verl's format) instead of JSONL.
export VERL_FILE_LOGGER_PATH="$TMP/metrics1.jsonl"
"$SFT" --config=examples/sft_tiny.textproto \
  "data.train_files=[$TMP/pq/train.parquet]" "data.val_files=[$TMP/pq/test.parquet]" \
  trainer.n_gpus_per_node=1 trainer.total_training_steps=3 \
  "trainer.default_local_dir=$TMP/ckpt1" "trainer.logger=[file]" \
  >"$TMP/run1.out" 2>"$TMP/run1.err" || fail "1-rank run exited $?: $(cat "$TMP/run1.err")"
losses() { grep -o '"\(train\|val\)/loss":[^,}]*' "$1" | cut -d: -f2; }
paste <(losses "$TMP/metrics.jsonl") <(losses "$TMP/metrics1.jsonl") >"$TMP/pairs"
[[ $(wc -l <"$TMP/pairs") -eq 4 ]] || fail "want 4 losses: $(cat "$TMP/pairs")"
awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $2) exit 1 }' "$TMP/pairs" ||
  fail "2-rank losses differ from 1-rank: $(cat "$TMP/pairs")"

# Ulysses sequence parallelism: 2 processes with ulysses_sequence_parallel_size=2
# (dp=1 x sp=2: each micro-batch's tokens split over the two ranks) give the
# 1-process losses.
export VERL_FILE_LOGGER_PATH="$TMP/metrics_sp.jsonl"
"$SFT" --config=examples/sft_tiny.textproto \
  "data.train_files=[$TMP/data/train.jsonl]" "data.val_files=[$TMP/data/test.jsonl]" \
  trainer.n_gpus_per_node=2 ulysses_sequence_parallel_size=2 \
  trainer.total_training_steps=3 "trainer.default_local_dir=$TMP/ckpt_sp" \
  "trainer.logger=[file]" >"$TMP/sp.out" 2>"$TMP/sp.err" ||
  fail "sp=2 run exited $?: $(cat "$TMP/sp.err")"
paste <(losses "$TMP/metrics_sp.jsonl") <(losses "$TMP/metrics1.jsonl") >"$TMP/sp_pairs"
[[ $(wc -l <"$TMP/sp_pairs") -eq 4 ]] || fail "sp: want 4 losses: $(cat "$TMP/sp_pairs")"
awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4 * $2) exit 1 }' "$TMP/sp_pairs" ||
  fail "sp=2 losses differ from 1-rank: $(cat "$TMP/sp_pairs")"
expect_error "ulysses_sequence_parallel_size: 3 must be positive and divide the number of processes (2)" \
  --config=examples/sft_tiny.textproto trainer.n_gpus_per_node=2 \
  ulysses_sequence_parallel_size=3

# LoRA (model.lora_rank): the HF folder holds merged weights, lora_adapter/
# the PEFT adapter; keys the SFT trainer does not serve are refused.
unset VERL_FILE_LOGGER_PATH
"$SFT" --config=examples/sft_tiny.textproto \
  "data.train_files=[$TMP/data/train.jsonl]" data.val_files=[] \
  trainer.n_gpus_per_node=1 model.lora_rank=4 model.lora_alpha=8 \
  trainer.total_training_steps=2 "trainer.default_local_dir=$TMP/ckpt_lora" \
  "trainer.logger=[console]" >"$TMP/lora.out" 2>"$TMP/lora.err" ||
  fail "lora run exited $?: $(cat "$TMP/lora.err")"
for f in huggingface/model.safetensors lora_adapter/adapter_model.safetensors \
  lora_adapter/adapter_config.json; do
  [[ -f "$TMP/ckpt_lora/global_step_2/$f" ]] || fail "lora: missing $f"
done
expect_error "'data.chat_template=x' is not available here" data.chat_template=x

# Multi-turn rows (data.multiturn.enable): a list of chat messages per row.
for i in 1 2 3 4; do
  echo '{"messages": [{"role": "user", "content": "1 + '$i'"}, {"role": "assistant", "content": "'$((1 + i))'"}, {"role": "user", "content": "times 2"}, {"role": "assistant", "content": "'$((2 + 2 * i))'"}]}'
done >"$TMP/chat.jsonl"
unset VERL_FILE_LOGGER_PATH
"$SFT" "data.train_files=[$TMP/chat.jsonl]" data.val_files=[] data.multiturn.enable=true \
  data.train_batch_size=2 data.micro_batch_size_per_gpu=1 data.max_length=64 \
  trainer.n_gpus_per_node=1 trainer.total_training_steps=2 \
  "trainer.default_local_dir=$TMP/ckpt_chat" "trainer.logger=[console]" \
  >"$TMP/chat.out" 2>"$TMP/chat.err" || fail "multi-turn run exited $?: $(cat "$TMP/chat.err")"
grep -q "sft: 2 steps" "$TMP/chat.out" || fail "multi-turn: no summary"
echo PASS
