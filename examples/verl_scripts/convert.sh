#!/bin/bash
# File: examples/verl_scripts/convert.sh
#
# Regenerates the flagfiles of this folder from verl's published example
# scripts: each script runs in bash with `python3`, `python`, `torchrun`, `ray`,
# `srun` and friends replaced by stubs that record the trainer's arguments, so the
# script's own variables resolve exactly as in a real launch. Then the
# arguments become flagfile lines (--key=value) with the machine-specific
# values swapped for the embedded defaults: model and data paths dropped (the
# built-in tiny model and task), trainer.n_gpus_per_node=1, trainer.nnodes=1.
#
#   examples/verl_scripts/convert.sh VERL_CHECKOUT examples/verl_scripts \
#       examples/grpo_trainer/run_qwen2-7b.sh ...
set -u
VERL="$1"; OUT="$2"; shift 2
mkdir -p "$OUT"
for script in "$@"; do
  name=$(echo "$script" | sed -e 's|^examples/||' -e 's|^tests/special_e2e/|e2e_|' \
         -e 's|\.sh$||' -e 's|/|__|g')
  args=$(mktemp)
  (
    mkdir -p /tmp/verl_convert/work && cd /tmp/verl_convert/work || exit 1
    export HOME=/home/user PWD=/work SLURM_JOB_NUM_NODES=1 SLURM_GPUS_PER_NODE=8
    record() {
      # The trainer's arguments: everything after `-m <module>` (or the script).
      local seen=0 module=""
      for a in "$@"; do
        if [[ $seen == 1 ]]; then printf '%s\n' "$a"; continue; fi
        if [[ $a == verl.trainer.* || $a == *main_ppo* || $a == *main_dapo* || $a == *sft_trainer* ]]; then
          seen=1; module="$a"
        fi
      done >>"$ARGS"
      [[ -n "$module" ]] && echo "# module: $module" >>"$ARGS.module"
      return 0
    }
    python3() { record "$@"; }
    python() { record "$@"; }
    torchrun() { record "$@"; }
    ray() { record "$@"; }
    srun() { record "$@"; }
    sleep() { :; }
    scontrol() { echo node0; }
    nvidia-smi() { echo "GPU 0"; }
    pip() { :; }
    huggingface-cli() { :; }
    hf() { :; }
    wandb() { :; }
    export -f record python3 python torchrun ray srun sleep scontrol nvidia-smi pip huggingface-cli hf wandb
    export ARGS="$args"
    # SFT scripts take <nproc_per_node> <save_path> as arguments.
    script_args=""
    [[ "$script" == */sft/* ]] && script_args="1 /tmp/verl_sft_save"
    timeout 20 bash -c "source '$VERL/$script' $script_args" >/dev/null 2>&1 </dev/null
  )
  module=$(head -1 "$args.module" 2>/dev/null | sed 's/# module: //')
  {
    echo "# Converted from verl's $script (github.com/volcengine/verl) by convert.sh."
    echo "# Trainer module: ${module:-?}. Model/data paths dropped (embedded defaults), GPU counts 1."
    while IFS= read -r a; do
      [[ -z "$a" ]] && continue
      key="${a%%=*}"
      bare="${key#+}"; bare="${bare#+}"
      case "$bare" in
        data.train_files|data.val_files|*model.path|*model.tokenizer_path|*tokenizer_path|model.partial_pretrain|*.hf_config_path|*lora_adapter_path) continue ;;
        trainer.n_gpus_per_node) echo "--$key=1"; continue ;;
        trainer.nnodes) echo "--$key=1"; continue ;;
      esac
      [[ "$a" != *=* ]] && continue  # a stray word (e.g. an empty line continuation)
      if [[ "$a" == -* ]]; then echo "$a"; else echo "--$a"; fi
    done <"$args"
  } >"$OUT/$name.flags"
  rm -f "$args" "$args.module"
done
