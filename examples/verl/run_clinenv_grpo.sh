#!/usr/bin/env bash
# GRPO on clinenv's text protocol with verl 0.9 (vLLM rollout, FSDP), in the settings of
# DiagAgent (PROFILE=diagagent, default) or DoctorAgent-RL (PROFILE=doctoragent_rl):
# GRPO, a group of 8 rollouts per case, a turn cap. NOT RUN HERE: clinenv's CI tests the
# agent loop with verl's own classes on CPU (tests/integrations/test_verl.py), never a
# training run; this script needs GPUs and verl with its vllm and fsdp extras (which pin
# torch 2.11 and transformers 5.9) plus clinenv[verl].
#
#   python examples/verl/write_data.py --out $HOME/data/clinenv --env-id EGIP-MedQA-v0 \
#       --exclude-flags target_in_records target_in_menu
#   PROFILE=diagagent bash examples/verl/run_clinenv_grpo.sh
#
# What clinenv needs from verl:
#   agent.agent_loop_config_path   the YAML that registers clinenv_agent with its env settings
#   multi_turn.max_assistant_turns T acquisition rounds take up to T + 1 doctor replies (+1:
#                                  DIAGNOSIS READY before the last round asks again)
#   data.max_response_length       the whole episode after the prompt (replies, patient's
#                                  answers, exam results); a longer one is cut, unfinished
set -euo pipefail
set -x
PROFILE="${PROFILE:-diagagent}"
DATA_DIR="${DATA_DIR:-$HOME/data/clinenv}"
MODEL="${MODEL:-Qwen/Qwen2.5-7B-Instruct}"   # both papers: Qwen2.5-7B-Instruct after SFT
NUM_GPUS="${NUM_GPUS:-8}"
HERE="$(cd "$(dirname "$0")" && pwd)"
case "$PROFILE" in
  diagagent)      ROUNDS=12 ;;   # DiagAgent: turn limit 12
  doctoragent_rl) ROUNDS=10 ;;   # DoctorAgent-RL: budget 2-10, here its maximum
  *) echo "PROFILE must be diagagent or doctoragent_rl" >&2; exit 2 ;;
esac

python -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  algorithm.use_kl_in_reward=false \
  data.train_files="$DATA_DIR/train.parquet" \
  data.val_files="$DATA_DIR/validation.parquet" \
  data.prompt_key=prompt \
  data.train_batch_size=32 \
  data.max_prompt_length=4096 \
  data.max_response_length=8192 \
  data.filter_overlong_prompts=true \
  actor_rollout_ref.model.path="$MODEL" \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=16 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.actor.use_kl_loss=true \
  actor_rollout_ref.actor.kl_loss_coef=0.001 \
  actor_rollout_ref.actor.entropy_coeff=0 \
  actor_rollout_ref.model.enable_gradient_checkpointing=true \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.rollout.multi_turn.max_assistant_turns=$((ROUNDS + 2)) \
  actor_rollout_ref.rollout.agent.default_agent_loop=clinenv_agent \
  actor_rollout_ref.rollout.agent.agent_loop_config_path="$HERE/agent_loop_$PROFILE.yaml" \
  trainer.n_gpus_per_node="$NUM_GPUS" \
  trainer.nnodes=1 \
  trainer.total_epochs=20 \
  trainer.test_freq=5 \
  trainer.save_freq=-1 \
  trainer.val_before_train=true \
  trainer.logger='["console"]' \
  trainer.project_name=clinenv \
  trainer.experiment_name="clinenv_grpo_$PROFILE" \
  "$@"
