"""verl adapter: a verl agent loop (``AgentLoopBase``) that plays clinenv episodes.

Extra ``verl`` (``verl>=0.9.1,<0.10``); :class:`ClinenvAgentLoop` registers as
``clinenv_agent`` on import. The YAML entry and the loop: docs/training.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    register,
)
from verl.utils.profiler import simple_timer

from clinenv.integrations import tools
from clinenv.integrations.tools import plain_mapping
from clinenv.llm.decoding import decode_reply

__all__ = ["ABILITY", "AGENT_NAME", "ClinenvAgentLoop", "verl_rows"]

#: The ``agent_name`` the loop is registered under.
AGENT_NAME = "clinenv_agent"
#: The rows' ``ability`` column.
ABILITY = "clinical_diagnosis"


@register(AGENT_NAME)
class ClinenvAgentLoop(AgentLoopBase):
    """One clinenv episode per instance (verl builds one per trajectory; module
    docstring).

    Args:
        *args, **kwargs: verl's (``AgentLoopBase``: trainer config, server manager,
            tokenizer, processor, dataset class, data config, ``hf_model_type``);
            ``tools`` (verl's tool list) is ignored.
        env_kwargs: ``gym.make`` settings for every episode (``reward_spec``,
            ``acquisition_rounds``, ``data_dir``...; a mapping or omegaconf config).
            ``action_format`` defaults to ``"text"`` (the text protocol's wording).
    """

    def __init__(self, *args: Any, env_kwargs: Any = None, tools: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.env_kwargs = {"action_format": "text", **plain_mapping(env_kwargs)}
        multi_turn = self.rollout_config.multi_turn
        self.max_assistant_turns = int(multi_turn.get("max_assistant_turns") or 0)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play the row's episode (docs/training.md).

        Args:
            sampling_params: passed to ``server_manager.generate`` as they are.
            **kwargs: the row as verl's dataset gives it: ``raw_prompt`` (chat
                messages) and ``extra_info`` (``case_id``, ``seed``, ``env_id``).

        Returns:
            ``AgentLoopOutput``: ``prompt_ids``, ``response_ids``, ``response_mask`` (1 on
            the doctor's tokens), ``response_logprobs`` (where the server gave them),
            ``reward_score``, ``num_turns`` (doctor replies + observations + 1),
            ``metrics`` (seconds in ``generate_sequences`` and in the environment,
            ``tool_calls``) and ``extra_fields`` (docs/training.md).

        Raises:
            ValueError: the row lacks ``case_id``, ``seed`` or ``env_id``; as
                :class:`~clinenv.integrations.tools.ToolEpisode`.
        """
        row = plain_mapping(kwargs.get("extra_info"))
        missing = [key for key in ("case_id", "seed", "env_id") if row.get(key) is None]
        if missing:
            raise ValueError(f"ClinenvAgentLoop: extra_info has no {', '.join(missing)} "
                             "(rows of clinenv.integrations.verl.verl_rows carry them)")
        metrics: dict[str, Any] = {}
        with simple_timer("tool_calls", metrics):
            episode = await asyncio.to_thread(tools.ToolEpisode, row["env_id"],
                                              **self.env_kwargs)
            opening = await asyncio.to_thread(episode.reset, row["case_id"], int(row["seed"]),
                                              row.get("max_rounds"))
        messages = [dict(m) for m in kwargs.get("raw_prompt") or []]
        if messages and messages[-1].get("role") == "user":
            messages[-1]["content"] = messages[-1]["content"] + opening
        else:
            messages.append({"role": "user", "content": opening})

        request_id = uuid4().hex
        token_ids = await self.ct_build_initial_tokens(messages)
        prompt_length = len(token_ids)
        mask: list[int] = []
        logprobs: list[float] | None = None
        doctor_turns = env_turns = 0
        while True:
            with simple_timer("generate_sequences", metrics):
                out = await self.server_manager.generate(
                    request_id=request_id, prompt_ids=token_ids,
                    sampling_params=sampling_params)
            if out.num_preempted is not None:
                metrics["num_preempted"] = max(metrics.get("num_preempted", 0), 0) \
                    + out.num_preempted
            if out.log_probs and logprobs is None:
                logprobs = [0.0] * len(mask)
            merged, mask, aligned = await self.ct_merge_assistant_token(
                token_ids, list(out.token_ids), mask, logprobs,
                assistant_logprobs=list(out.log_probs) if logprobs is not None else None)
            token_ids, logprobs = merged.token_ids, aligned
            doctor_turns += 1
            reply = decode_reply(self.tokenizer, out.token_ids)
            messages.append({"role": "assistant", "content": reply})
            with simple_timer("tool_calls", metrics):
                obs = await asyncio.to_thread(episode.step_text, reply)
            if (episode.done or len(mask) >= self.response_length
                    or 0 < self.max_assistant_turns <= doctor_turns):
                break
            previous = list(messages)
            messages.append({"role": "user", "content": obs})
            merged, new_mask, aligned = await self.ct_merge_context_msg(
                previous, messages, token_ids, mask, logprobs)
            if len(new_mask) >= self.response_length:
                break
            token_ids, mask, logprobs = merged.token_ids, new_mask, aligned
            env_turns += 1

        components = episode.reward_components()
        cut = self.response_length
        extra_info = {**tools.component_metrics(components), "turns": doctor_turns,
                      "exams_ordered": sum(c.name == "order_exam" for c in episode.calls),
                      "finished": float(episode.done)}
        return AgentLoopOutput(
            prompt_ids=token_ids[:prompt_length],
            response_ids=token_ids[prompt_length:][:cut],
            response_mask=mask[:cut],
            response_logprobs=logprobs[:cut] if logprobs is not None else None,
            reward_score=episode.episode_reward(),
            num_turns=doctor_turns + env_turns + 1,
            metrics=AgentLoopMetrics(**metrics),
            extra_fields={"reward_extra_info": extra_info, "clinenv": {
                **row, "finished": episode.done, "env_info": dict(episode.info),
                "reward_components": components.to_dict(),
                "calls": [{"name": c.name, "arguments": c.arguments}
                          for c in episode.calls]}})


def verl_rows(env_id: str, split: str | Path | Sequence[str] | None = None, *,
              seed: int = 0, exclude_flags: Sequence[str] = (), agent_name: str = AGENT_NAME,
              **env_kwargs: Any) -> tools.TaskRows:
    """verl dataset rows, one per case (write them with ``datasets.Dataset.from_list(rows)
    .to_parquet(...)`` or pandas): ``data_source`` (``env_id``), ``prompt`` (system
    :data:`~clinenv.integrations.tools.TEXT_SYSTEM_PROMPT`, user
    :data:`~clinenv.integrations.tools.TASK_INTRO`; the loop appends the opening text),
    ``ability`` (:data:`ABILITY`), ``reward_model`` (``{"style": "environment",
    "ground_truth": ""}``: the loop sets the reward, so no reward function reads it),
    ``extra_info`` (``case_id``, ``seed``, ``env_id`` and ``index``, the row's position,
    which verl groups by) and ``agent_name``. Arguments, ``exclude_flags`` and errors as
    :func:`clinenv.integrations.tools.task_rows`; the returned
    :class:`~clinenv.integrations.tools.TaskRows` says what was left out."""
    prompt = [{"role": "system", "content": tools.TEXT_SYSTEM_PROMPT},
              {"role": "user", "content": tools.TASK_INTRO}]
    rows = tools.task_rows(env_id, split, seed=seed, exclude_flags=exclude_flags,
                           **env_kwargs)
    return tools.TaskRows(
        [{"data_source": env_id, "prompt": prompt, "ability": ABILITY,
          "reward_model": {"style": "environment", "ground_truth": ""},
          "extra_info": {**row, "index": index}, "agent_name": agent_name}
         for index, row in enumerate(rows)],
        excluded=rows.excluded, considered=rows.considered, note=rows.note)
