"""SkyRL adapter: clinenv as a ``skyrl_gym`` text environment (``BaseTextEnv``).

Install with ``pip install 'clinenv[skyrl]'`` (``skyrl-gym>=0.4``). :func:`task_rows`
needs nothing beyond clinenv.

SkyRL's generator (``skyrl/train/generators/skyrl_gym_generator.py``) builds one
environment per trajectory with ``skyrl_gym.make(env_class, env_config=<the
environment.skyrl_gym.<env_class> config>, extras=<the row's columns other than prompt
and env_class, plus max_turns>)``, calls ``init(prompt)`` with the row's chat messages,
then ``step(reply)`` with each model reply until ``done``, from a thread pool. The
doctor plays the text protocol (EGIP section 3.2), instructed by
:data:`~clinenv.integrations.tools.TEXT_SYSTEM_PROMPT` (``DIAGNOSIS READY:`` during
acquisition ends it early), through
:meth:`~clinenv.integrations.tools.ToolEpisode.step_text`: delta observations (only what
is new) as user messages; reward 0.0 on every step but the last, which carries the
episode's return (the terminal score); the environment's ``info`` and the doctor's
actions (as tool calls) in ``metadata``. :func:`register_clinenv` must run inside the
Ray entrypoint (SkyRL's docs), where the workers make their environments.
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
            as :func:`task_rows` writes them), ``env_id`` there or in ``env_config``;
            ``max_turns`` (set by SkyRL) ends an unfinished episode with reward 0.0.

    Raises:
        ValueError: no ``case_id``, ``seed`` or ``env_id``; as
            :class:`~clinenv.integrations.tools.ToolEpisode`.
    """

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None):
        super().__init__()
        settings = _plain(env_config)
        extras = dict(extras or {})
        row = {**_plain(extras.get("extra_info")), **extras}
        env_id = row.get("env_id") or settings.pop("env_id", None)
        settings.pop("env_id", None)
        missing = [k for k, v in (("case_id", row.get("case_id")), ("seed", row.get("seed")),
                                  ("env_id", env_id)) if v is None]
        if missing:
            raise ValueError(f"ClinenvTextEnv: the row has no {', '.join(missing)} (rows of "
                             "clinenv.integrations.skyrl.task_rows carry them in extra_info)")
        self.case_id, self.seed = row["case_id"], int(row["seed"])
        self.max_turns = int(extras.get("max_turns") or 0)  # 0: the episode's own limit
        self.episode = tools.ToolEpisode(env_id, **settings)

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Reset to the row's episode; returns ``prompt`` with the opening text appended to
        its last user message (or added as one), and the environment's ``info``."""
        self.turns = 0
        opening = self.episode.reset(self.case_id, self.seed)
        messages = [dict(m) for m in prompt or []]
        if messages and messages[-1].get("role") == "user":
            messages[-1]["content"] = messages[-1]["content"] + opening
        else:
            messages.append({"role": "user", "content": opening})
        return messages, dict(self.episode.info)

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """One doctor reply; the final answer's step (or the ``max_turns``-th) is
        ``done`` with the episode's return as its reward and no observation."""
        self.turns += 1
        obs = self.episode.step_text(action)
        done = self.episode.done or (0 < self.max_turns <= self.turns)
        metadata = {**self.episode.info, "clinenv_done": self.episode.done,
                    "calls": [{"name": c.name, "arguments": c.arguments}
                              for c in self.episode.calls]}
        return BaseTextEnvStepOutput(
            observations=[] if done else [{"role": "user", "content": obs}],
            reward=self.episode.reward if done else 0.0, done=done, metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        """``reward``, ``turns``, ``exams_ordered`` and ``finished`` (1.0 once scored)."""
        exams = sum(call.name == "order_exam" for call in self.episode.calls)
        return {"reward": self.episode.reward, "turns": self.turns,
                "exams_ordered": exams, "finished": float(self.episode.done)}


def register_clinenv(env_class: str = ENV_CLASS) -> str:
    """Register :class:`ClinenvTextEnv` in ``skyrl_gym`` under ``env_class`` (once per
    process; again is a no-op); returns ``env_class``. Rows name it in ``env_class``."""
    if env_class not in registration.registry:
        register(id=env_class, entry_point="clinenv.integrations.skyrl:ClinenvTextEnv")
    return env_class


def task_rows(env_id: str, split: str | Path | Sequence[str] | None = None, *,
              seed: int = 0, env_class: str = ENV_CLASS,
              **env_kwargs: Any) -> list[dict[str, Any]]:
    """SkyRL dataset rows, one per case (write them with ``datasets.Dataset.from_list(rows)
    .to_parquet(...)``): ``data_source`` (``env_id``), ``prompt`` (system
    :data:`~clinenv.integrations.tools.TEXT_SYSTEM_PROMPT`, user
    :data:`~clinenv.integrations.tools.TASK_INTRO`; ``init`` adds the opening text),
    ``env_class`` and ``extra_info`` (``case_id``, ``seed``, ``env_id``). Arguments and
    errors as :func:`clinenv.integrations.tools.task_rows`."""
    prompt = [{"role": "system", "content": tools.TEXT_SYSTEM_PROMPT},
              {"role": "user", "content": tools.TASK_INTRO}]
    return [{"data_source": env_id, "prompt": prompt, "env_class": env_class,
             "extra_info": row}
            for row in tools.task_rows(env_id, split, seed=seed, **env_kwargs)]


def _plain(config: Any) -> dict[str, Any]:
    """A plain dict of a mapping or an omegaconf config (``None``: empty)."""
    if config is None:
        return {}
    if type(config).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf
        return dict(OmegaConf.to_container(config, resolve=True))
    return dict(config)
