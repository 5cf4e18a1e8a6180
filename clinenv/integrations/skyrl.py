"""SkyRL adapter: clinenv as a ``skyrl_gym`` text environment (``BaseTextEnv``).

Extra ``skyrl``; call :func:`register_clinenv` inside the Ray entrypoint. The reward is
0.0 on every step but the last (docs/training.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skyrl_gym.envs import register, registration
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

from clinenv.integrations import tools

__all__ = ["ENV_CLASS", "ClinenvTextEnv", "register_clinenv", "task_rows"]

#: The ``env_class`` :func:`register_clinenv` registers by default.
ENV_CLASS = "clinenv"


class ClinenvTextEnv(BaseTextEnv):
    """One clinenv episode per instance (SkyRL makes one per trajectory).

    Args:
        env_config: environment settings (a mapping or omegaconf ``DictConfig``):
            ``env_id`` (default for rows without one) and any ``gym.make`` keyword
            (``data_dir``, ``acquisition_rounds``...).
        extras: the row: ``case_id`` and ``seed`` (top level or under ``extra_info``,
            as :func:`task_rows` writes them), ``env_id`` there or in ``env_config``,
            and an optional round budget ``max_rounds`` (the reset option);
            ``max_turns`` (set by SkyRL) ends an unfinished episode, with the reward of
            the unfinished rule (docs/training.md).

    Raises:
        ValueError: no ``case_id``, ``seed`` or ``env_id``; as
            :class:`~clinenv.integrations.tools.ToolEpisode`.
    """

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        settings = tools.plain_mapping(env_config)
        # the doctor writes text actions (TEXT_SYSTEM_PROMPT): the text protocol's wording
        settings.setdefault("action_format", "text")
        extras = dict(extras or {})
        row = {**tools.plain_mapping(extras.get("extra_info")), **extras}
        env_id = row.get("env_id") or settings.pop("env_id", None)
        settings.pop("env_id", None)
        missing = [k for k, v in (("case_id", row.get("case_id")), ("seed", row.get("seed")),
                                  ("env_id", env_id)) if v is None]
        if missing:
            raise ValueError(f"ClinenvTextEnv: the row has no {', '.join(missing)} (rows of "
                             "clinenv.integrations.skyrl.task_rows carry them in extra_info)")
        self.case_id, self.seed = row["case_id"], int(row["seed"])
        self.max_rounds = row.get("max_rounds")  # the row's round budget, or None
        self.max_turns = int(extras.get("max_turns") or 0)  # 0: the episode's own limit
        self.episode = tools.ToolEpisode(env_id, **settings)
        self.reward_given = 0.0  # the sum of the step rewards returned

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Reset to the row's episode; returns ``prompt`` with the opening text appended to
        its last user message (or added as one), and the environment's ``info``."""
        self.turns = 0
        self.reward_given = 0.0
        opening = self.episode.reset(self.case_id, self.seed, max_rounds=self.max_rounds)
        messages = [dict(m) for m in prompt or []]
        if messages and messages[-1].get("role") == "user":
            messages[-1]["content"] = messages[-1]["content"] + opening
        else:
            messages.append({"role": "user", "content": opening})
        return messages, dict(self.episode.info)

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One doctor reply; the final answer's step (or the ``max_turns``-th) is
        ``done``, with the episode's reward (docs/training.md), its components in
        ``metadata["reward_components"]`` and no observation."""
        self.turns += 1
        obs = self.episode.step_text(action)
        done = self.episode.done or (0 < self.max_turns <= self.turns)
        metadata = {**self.episode.info, "clinenv_done": self.episode.done,
                    "calls": [{"name": c.name, "arguments": c.arguments}
                              for c in self.episode.calls]}
        reward = 0.0
        if done:
            reward = self.episode.episode_reward()
            metadata["reward_components"] = self.episode.reward_components().to_dict()
        self.reward_given += reward
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": obs}],
            reward=reward, done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        """``reward`` (the sum of the step rewards returned), ``turns``,
        ``exams_ordered``, ``finished`` (1.0 once scored) and the components of the
        episode so far, ``reward_components/<name>`` (``None`` where undefined; module
        docstring)."""
        exams = sum(call.name == "order_exam" for call in self.episode.calls)
        metrics = {"reward": self.reward_given, "turns": self.turns,
                   "exams_ordered": exams, "finished": float(self.episode.done)}
        if self.episode.started:  # else init never ran: no episode, no components
            metrics.update(tools.component_metrics(self.episode.reward_components()))
        return metrics


def register_clinenv(env_class: str = ENV_CLASS) -> str:
    """Register :class:`ClinenvTextEnv` in ``skyrl_gym`` under ``env_class`` (once per
    process; again is a no-op); returns ``env_class``. Rows name it in ``env_class``."""
    if env_class not in registration.registry:
        register(id=env_class, entry_point="clinenv.integrations.skyrl:ClinenvTextEnv")
    return env_class


def task_rows(env_id: str, split: str | Path | Sequence[str] | None = None, *,
              seed: int = 0, env_class: str = ENV_CLASS, exclude_flags: Sequence[str] = (),
              order: str = "dataset", difficulty: Any = None,
              **env_kwargs: Any) -> tools.TaskRows:
    """SkyRL dataset rows, one per case (write them with ``datasets.Dataset.from_list(rows)
    .to_parquet(...)``): ``data_source`` (``env_id``), ``prompt`` (system
    :data:`~clinenv.integrations.tools.TEXT_SYSTEM_PROMPT`, user
    :data:`~clinenv.integrations.tools.TASK_INTRO`; ``init`` adds the opening text),
    ``env_class`` and ``extra_info`` (``case_id``, ``seed``, ``env_id``). Arguments,
    ``exclude_flags`` (e.g. :data:`~clinenv.integrations.tools.LEAK_FLAGS`; default
    ``()``, every case), ``order`` / ``difficulty`` (``"curriculum"``: easiest first;
    SkyRL shuffles its training rows by default) and errors as
    :func:`clinenv.integrations.tools.task_rows`; the
    returned :class:`~clinenv.integrations.tools.TaskRows` says what was left out
    (``excluded``, ``note``)."""
    prompt = [{"role": "system", "content": tools.TEXT_SYSTEM_PROMPT},
              {"role": "user", "content": tools.TASK_INTRO}]
    rows = tools.task_rows(env_id, split, seed=seed, exclude_flags=exclude_flags,
                           order=order, difficulty=difficulty, **env_kwargs)
    return tools.TaskRows([{"data_source": env_id, "prompt": prompt, "env_class": env_class,
                            "extra_info": row} for row in rows],
                          excluded=rows.excluded, considered=rows.considered, note=rows.note)
