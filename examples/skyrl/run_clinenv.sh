set -x

# GRPO on clinenv's text protocol with SkyRL (colocated training + generation), in the
# shape of SkyRL's own examples/train/<env>/run_<env>.sh. Run from the clinenv clone, in
# an environment with clinenv[skyrl] and SkyRL's trainer (with vLLM) installed:
#   python examples/skyrl/main_clinenv.py --write-data $HOME/data/clinenv --env-id EGIP-Demo-v0
#   bash examples/skyrl/run_clinenv.sh
#
# clinenv needs (main_clinenv.py also sets the first four; docs/training.md, SkyRL):
#   environment.env_class=clinenv     the env register_clinenv() registers in the entrypoint
#   generator.batched=false           multi-turn environments need it
#   generator.max_turns=20            T acquisition rounds take up to T + 1 replies (SkyRL's default: 1)
#   generator.max_input_length=8192   the whole conversation so far (SkyRL's default: 512)
# A trajectory that passes max_input_length is cut without the environment seeing it
# (reward 0.0); keep max_turns within the token budget.

DATA_DIR="${DATA_DIR:-$HOME/data/clinenv}"
NUM_GPUS="${NUM_GPUS:-4}"
MODEL="${MODEL:-Qwen/Qwen2.5-1.5B-Instruct}"

python examples/skyrl/main_clinenv.py \
  data.train_data="['$DATA_DIR/train.parquet']" \
  data.val_data="['$DATA_DIR/validation.parquet']" \
  environment.env_class=clinenv \
  generator.batched=false \
  generator.max_turns=20 \
  generator.max_input_length=8192 \
  generator.sampling_params.max_generate_length=512 \
  trainer.max_prompt_length=2048 \
  trainer.algorithm.advantage_estimator="grpo" \
  trainer.policy.model.path="$MODEL" \
  trainer.placement.colocate_all=true \
  trainer.strategy=fsdp \
  trainer.placement.policy_num_gpus_per_node=$NUM_GPUS \
  trainer.placement.ref_num_gpus_per_node=$NUM_GPUS \
  generator.inference_engine.num_engines=$NUM_GPUS \
  generator.inference_engine.tensor_parallel_size=1 \
  generator.inference_engine.backend=vllm \
  generator.inference_engine.run_engines_locally=true \
  generator.n_samples_per_prompt=8 \
  trainer.epochs=20 \
  trainer.train_batch_size=16 \
  trainer.policy_mini_batch_size=16 \
  trainer.micro_forward_batch_size_per_gpu=4 \
  trainer.micro_train_batch_size_per_gpu=4 \
  trainer.eval.before_train=true \
  trainer.eval.interval=5 \
  trainer.policy.optimizer_config.lr=1.0e-6 \
  trainer.algorithm.use_kl_loss=true \
  trainer.logger="console" \
  trainer.project_name="clinenv" \
  trainer.run_name="clinenv_grpo" \
  "$@"
