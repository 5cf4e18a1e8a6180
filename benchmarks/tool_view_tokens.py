"""Tokens per tool-view episode at T = 3, 5 and 19, with full and compact tool results.

The privileged teacher (:class:`clinenv.agents.teacher_doctor.TeacherDoctor`) plays each
MedQA case through :class:`clinenv.integrations.tools.ToolEpisode` (its text actions
mapped to tool calls, :func:`~clinenv.integrations.tools.action_to_tool`): the episode a
correct policy plays, questions and exams up to T, then ``submit_diagnosis`` twice.

Counted, per episode, as TRL counts them:

- ``prompt``: the system prompt (:data:`TOOL_SYSTEM_PROMPT`), the tools block
  (:data:`TOOL_SCHEMAS` as JSON), the user message ``TASK_INTRO`` + the opening text;
- ``completion``: what ``max_completion_length`` must hold: every tool call the model
  writes (``{"name": ..., "arguments": ...}``) and every tool result TRL appends.

With ``--tokenizer NAME`` (a tokenizer transformers can load, from the local cache
offline) the texts are tokenized. Without one (the default, and what docs/training.md
reports) tokens are approximated as ``ceil(chars / 3.5)`` per message plus 8 template
tokens per message (role markers, call tags): BPE tokenizers of chat models give about
3.5-4 characters per token on this clinical English, so the estimate errs high.

    python benchmarks/tool_view_tokens.py [--dataset medqa] [--cases N] [--tokenizer NAME]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics

from clinenv.agents.teacher_doctor import TeacherDoctor
from clinenv.integrations.tools import (
    TASK_INTRO,
    TOOL_SCHEMAS,
    TOOL_SYSTEM_PROMPT,
    ToolEpisode,
    action_to_tool,
)

TEMPLATE_TOKENS = 8
CHARS_PER_TOKEN = 3.5


def counter(name: str | None):
    if name is None:
        return lambda text: math.ceil(len(text) / CHARS_PER_TOKEN) + TEMPLATE_TOKENS
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name)
    return lambda text: len(tok.encode(text, add_special_tokens=False)) + TEMPLATE_TOKENS


def episode_tokens(episode: ToolEpisode, teacher: TeacherDoctor, case_id, seed, count):
    teacher.reset(seed=seed)
    text = episode.reset(case_id, seed)
    prompt = (count(TOOL_SYSTEM_PROMPT) + count(json.dumps(TOOL_SCHEMAS))
              + count(TASK_INTRO + text))
    completion, calls = 0, 0
    while not episode.done:
        info = dict(episode.info, phase=episode.env.runtime.phase)
        action = teacher.act({"text": text}, info)
        call = action_to_tool(action, phase=info["phase"])
        completion += count(json.dumps({"name": call.name, "arguments": call.arguments}))
        text = episode.call(call.name, call.arguments)
        completion += count(text)
        calls += 1
    return prompt, completion, calls, episode.reward


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="medqa")
    ap.add_argument("--cases", type=int, default=0, help="the first N cases (0: all)")
    ap.add_argument("--tokenizer", default=None)
    args = ap.parse_args(argv)
    count = counter(args.tokenizer)
    env_id = f"EGIP-{ {'medqa': 'MedQA', 'nejm': 'NEJM', 'demo': 'Demo'}[args.dataset]}-v0"
    unit = args.tokenizer or f"approx. ceil(chars/{CHARS_PER_TOKEN}) + {TEMPLATE_TOKENS}/msg"
    print(f"{env_id}, {args.cases or 'all'} cases, teacher episodes; tokens: {unit}")
    print("| T | tool results | calls (median) | prompt (median) | completion median | "
          "completion p90 | completion max | reward mean |")
    print("|---|---|---|---|---|---|---|---|")
    for rounds in (3, 5, 19):
        for mode in ("full", "compact"):
            episode = ToolEpisode(env_id, acquisition_rounds=rounds, tool_results=mode)
            teacher = TeacherDoctor(episode.env.pool)
            ids = [c.case_id for c in episode.env.pool.cases][:args.cases or None]
            rows = [episode_tokens(episode, teacher, cid, i, count) for i, cid in enumerate(ids)]
            comp = sorted(r[1] for r in rows)
            p90 = comp[min(len(comp) - 1, math.ceil(0.9 * len(comp)) - 1)]
            print(f"| {rounds} | {mode} | {statistics.median(r[2] for r in rows):g} | "
                  f"{statistics.median(r[0] for r in rows):g} | {statistics.median(comp):g} | "
                  f"{p90} | {comp[-1]} | {statistics.fmean(r[3] for r in rows):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
