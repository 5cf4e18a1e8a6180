"""verifiers adapter: clinenv as a verifiers v1 taskset and environment.

Extra ``verifiers`` (``verifiers>=0.4,<0.5``); the taskset id is ``clinenv-verifiers``
(module ``clinenv_verifiers``). What it plays and records: docs/training.md.
"""

from __future__ import annotations

import asyncio
from typing import Any

import verifiers.v1 as vf
from pydantic import Field, field_validator
from verifiers.v1.runtimes import SubprocessConfig

from clinenv.integrations.tools import (
    TEXT_SYSTEM_PROMPT,
    TaskRows,
    ToolEpisode,
    check_flags,
    component_metrics,
    task_rows,
)

__all__ = ["ClinenvEnv", "ClinenvTaskset"]  # one Taskset and one Env (verifiers' loader)


class ClinenvTasksetConfig(vf.TasksetConfig):
    """Which episodes load (``--env.taskset.*``)."""

    env_id: str = "EGIP-Demo-v0"
    """An EGIP text environment id."""
    split: str | list[str] | None = None
    """A case-list file (``clinenv data split``) or case ids; ``None``: every case."""
    seed: int = Field(0, ge=0)
    """The run seed the episode seeds derive from (``clinenv run --seed``)."""
    exclude_flags: list[str] = Field(default_factory=list)
    """Case flags whose cases are left out (``--env.taskset.exclude-flags
    target_in_records target_in_menu``: the cases whose record or menu names the target;
    the names of :data:`~clinenv.integrations.tools.CASE_FLAG_NAMES`, checked here);
    default none, every case (:func:`~clinenv.integrations.tools.task_rows`)."""
    env_kwargs: dict[str, Any] = Field(default_factory=dict)
    """``gym.make`` settings (``data_dir``, ``acquisition_rounds``...)."""

    @field_validator("exclude_flags")
    @classmethod
    def _known_flags(cls, value: list[str]) -> list[str]:
        return list(check_flags(value))


class ClinenvData(vf.TaskData):
    info: dict[str, Any]
    """``{"case_id", "seed", "env_id"}``: the episode the prompt opens."""


class ClinenvTask(vf.Task[ClinenvData, vf.State, vf.TaskConfig]):
    @property
    def key(self) -> str:
        """``<env_id>/<case_id>/<seed>``: the episode, independent of the load order."""
        info = self.data.info
        return f"{info['env_id']}/{info['case_id']}/{info['seed']}"


class ClinenvTaskset(vf.Taskset[ClinenvTask, ClinenvTasksetConfig]):
    """One task per case: prompt = the opening text, system prompt =
    :data:`~clinenv.integrations.tools.TEXT_SYSTEM_PROMPT` (the text-protocol doctor of
    the tool view, where ``DIAGNOSIS READY:`` during acquisition ends it early); the
    cases of ``exclude_flags`` left out (:meth:`rows` says which; a warning too).

    Raises (on iteration):
        clinenv.case_list.CaseListError, ValueError, gymnasium.error.Error: as
            :func:`~clinenv.integrations.tools.task_rows`.
    """

    def rows(self) -> TaskRows:
        """The episodes the tasks open (:func:`~clinenv.integrations.tools.task_rows`):
        their ``excluded`` and ``note`` say which cases ``exclude_flags`` left out.

        Raises:
            As the class (on iteration).
        """
        cfg = self.config
        return task_rows(cfg.env_id, cfg.split, seed=cfg.seed,
                         exclude_flags=tuple(cfg.exclude_flags), **_text_view(cfg.env_kwargs))

    def load(self):
        cfg = self.config
        kwargs = _text_view(cfg.env_kwargs)
        episode = ToolEpisode(cfg.env_id, **kwargs)
        for row in self.rows():
            yield ClinenvTask(ClinenvData(
                id=str(row["case_id"]), name=f"{cfg.env_id}/{row['case_id']}",
                prompt=episode.reset(row["case_id"], row["seed"],
                                     max_rounds=row.get("max_rounds")),
                system_prompt=TEXT_SYSTEM_PROMPT, info=row), cfg.task)


def _text_view(env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """The doctor writes text actions here (``TEXT_SYSTEM_PROMPT``): the text protocol's
    wording (``action_format="text"``) unless ``env_kwargs`` sets another."""
    return {"action_format": "text", **env_kwargs}


class ClinenvEnvConfig(vf.EnvConfig):
    doctor: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"},
                                            runtime=SubprocessConfig())
    """The doctor seat (``--env.doctor.*``): tool-less chat by default, run as a local
    subprocess (verifiers' default runtime is Prime's hosted sandbox, which needs a Prime
    login; ``--env.doctor.runtime.type prime`` picks it). verifiers' chat program is a
    ``uv`` script: ``uv`` on PATH fetches its packages on first use."""


class ClinenvEnv(vf.Env[ClinenvEnvConfig]):
    """Steps a clinenv episode with the doctor's replies (docs/training.md)."""

    async def run(self, task: ClinenvTask, agents: vf.Agents) -> None:
        """Play one episode.

        Raises:
            ValueError: the task's prompt is not the episode's opening text (made by
                other data or settings; the episode would not be the one prompted).
        """
        info = task.data.info
        kwargs = _text_view(getattr(self.taskset.config, "env_kwargs", {}))
        episode = ToolEpisode(info["env_id"], **kwargs)
        opening = episode.reset(info["case_id"], int(info["seed"]),
                                max_rounds=info.get("max_rounds"))
        if opening != task.data.prompt:
            raise ValueError(f"task {task.data.name}: its prompt is not the opening text "
                             f"of {info} with these settings; reload the taskset")
        turns = 0
        async with agents.doctor.interaction(task) as interaction:
            segment = await interaction.turn()
            while not segment.terminated:
                turns += 1
                obs = await asyncio.to_thread(episode.step_text, segment.last_reply)
                if episode.done:
                    break
                segment = await interaction.turn(obs)
        trace = interaction.trace
        components = episode.reward_components()
        trace.record_reward("clinenv_reward", episode.episode_reward(), 1.0)
        for name, value in component_metrics(components).items():
            trace.metrics[name] = value  # None kept (record_metric would float() it)
        trace.record_metric("turns", turns)
        trace.record_metric("exams_ordered",
                            sum(call.name == "order_exam" for call in episode.calls))
        trace.record_metric("finished", float(episode.done))
        trace.info["clinenv"] = {
            **info, "finished": episode.done, "env_info": dict(episode.info),
            "reward_components": components.to_dict(),
            "calls": [{"name": c.name, "arguments": c.arguments} for c in episode.calls]}
