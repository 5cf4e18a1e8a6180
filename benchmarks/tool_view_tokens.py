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

With ``--tokenizer NAME`` (a hub id in the local cache, or a local folder) the episode
is rendered as TRL renders it, with the tokenizer's chat template when it supports tools
and TRL's ``qwen3_chat_template`` otherwise (as docs/training.md advises for another
ChatML tokenizer): ``prompt`` is the prompt with the generation prompt, ``completion``
the rest of the whole conversation (calls as ``tool_calls``, results as ``tool``
messages). Without one tokens are approximated as ``ceil(chars / 3.5)`` per message
plus 8 template tokens per message (role markers, call tags); against SmolLM2's
tokenizer under ``qwen3_chat_template`` the estimate runs low (MedQA, T = 19, compact:
max 2,003 estimated, 2,574 counted; docs/training.md).

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
    """``(count, unit)``: ``count(messages)`` gives (prompt, completion) tokens of a
    conversation whose first two messages are the prompt."""
    if name is None:
        def approx(messages):
            sizes = [math.ceil(len(_text(m)) / CHARS_PER_TOKEN) + TEMPLATE_TOKENS
                     for m in messages]
            return (sum(sizes[:2]) + _approx_tools(), sum(sizes[2:]))
        return approx, f"approx. ceil(chars/{CHARS_PER_TOKEN}) + {TEMPLATE_TOKENS}/msg"
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_chat_template, supports_tool_calling

    tok = AutoTokenizer.from_pretrained(name)
    template = "own chat template"
    if not supports_tool_calling(tok):
        tok.chat_template, template = qwen3_chat_template, "TRL's qwen3_chat_template"

    def render(messages, gen):
        ids = tok.apply_chat_template(messages, tools=TOOL_SCHEMAS, tokenize=True,
                                      add_generation_prompt=gen, return_dict=True)
        return len(ids["input_ids"])

    def rendered(messages):
        prompt = render(messages[:2], True)
        return prompt, render(messages, False) - prompt
    return rendered, f"{name} ({template})"


def _text(message) -> str:
    calls = message.get("tool_calls") or []
    return message.get("content") or "".join(
        json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
        for c in calls)


def _approx_tools() -> int:
    return math.ceil(len(json.dumps(TOOL_SCHEMAS)) / CHARS_PER_TOKEN) + TEMPLATE_TOKENS


def episode_tokens(episode: ToolEpisode, teacher: TeacherDoctor, case_id, seed, count):
    teacher.reset(seed=seed)
    text = episode.reset(case_id, seed)
    messages = [{"role": "system", "content": TOOL_SYSTEM_PROMPT},
                {"role": "user", "content": TASK_INTRO + text}]
    calls = 0
    while not episode.done:
        info = dict(episode.info, phase=episode.env.runtime.phase)
        action = teacher.act({"text": text}, info)
        call = action_to_tool(action, phase=info["phase"])
        text = episode.call(call.name, call.arguments)
        messages += [{"role": "assistant", "content": "", "tool_calls": [
                         {"type": "function", "function": {"name": call.name,
                                                           "arguments": call.arguments}}]},
                     {"role": "tool", "name": call.name, "content": text}]
        calls += 1
    prompt, completion = count(messages)
    return prompt, completion, calls, episode.reward


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="medqa")
    ap.add_argument("--cases", type=int, default=0, help="the first N cases (0: all)")
    ap.add_argument("--tokenizer", default=None)
    args = ap.parse_args(argv)
    count, unit = counter(args.tokenizer)
    env_id = f"EGIP-{ {'medqa': 'MedQA', 'nejm': 'NEJM', 'demo': 'Demo'}[args.dataset]}-v0"
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
