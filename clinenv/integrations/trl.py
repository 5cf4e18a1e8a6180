"""TRL adapter: clinenv as a ``GRPOTrainer(environment_factory=...)`` environment.

Extra ``trl`` (``trl>=1.16``, Python >= 3.11); :func:`task_dataset` needs ``datasets``.
How TRL drives the class and logs the components: docs/training.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinenv.agents.patient_cache import PatientReplyCache
from clinenv.integrations.tools import (
    TASK_INTRO,
    TOOL_SYSTEM_PROMPT,
    ToolEpisode,
    task_rows,
    tool_docstring,
)
from clinenv.reward_components import COMPONENTS, RewardComponents
from clinenv.reward_spec import load_reward_spec

__all__ = ["TASK_INTRO", "ComponentReward", "TextAnswerAtEnd", "component_reward_funcs",
           "make_env_factory", "task_dataset", "task_prompt"]


def make_env_factory(env_id: str, *,
                     patient_cache: bool | PatientReplyCache | str | Path | None = None,
                     **env_kwargs: Any) -> type:
    """A class for ``GRPOTrainer(environment_factory=...)`` over ``env_id``.

    Instances have ``reset(**row) -> str``, the four tools and ``get_reward() -> float``
    (:meth:`~clinenv.integrations.tools.ToolEpisode.episode_reward`).

    Args:
        env_id: an EGIP text environment id, e.g. ``"EGIP-Demo-v0"``.
        patient_cache: the LLM patient's reply cache: ``None`` or ``False`` (off), ``True``
            (one in-memory cache for every instance), a
            :class:`~clinenv.agents.patient_cache.PatientReplyCache`, or a ``.jsonl`` path.
        **env_kwargs: ``gym.make`` settings (``data_dir``, ``reward_spec``,
            ``patient="llm"``...); each instance builds its own, so pass seats by name.

    Raises:
        TypeError: ``patient_cache`` of another type.
        ValueError: a cache file that does not parse; a bad ``reward_spec``; as
            :class:`~clinenv.integrations.tools.ToolEpisode`.
        gymnasium.error.Error: as :class:`~clinenv.integrations.tools.ToolEpisode`.
    """
    cache = _patient_cache(patient_cache)
    if env_kwargs.get("reward_spec") is not None:
        env_kwargs["reward_spec"] = load_reward_spec(env_kwargs["reward_spec"])
    ToolEpisode(env_id, **env_kwargs)  # fail here, not inside the trainer

    class ClinenvToolEnv:
        """One clinenv episode per rollout, through the tool view."""

        patient_cache = cache

        def __init__(self) -> None:
            self._episode = ToolEpisode(env_id, patient_cache=cache, **env_kwargs)

        def reset(self, **row: Any) -> str:
            """Start the row's episode; returns the doctor's opening text.

            Raises:
                ValueError: the row has no ``case_id`` or ``seed``, names another
                    ``env_id``, or has a bad ``max_rounds`` (an int in
                    1..acquisition_rounds, or ``None``).
            """
            missing = [key for key in ("case_id", "seed") if row.get(key) is None]
            if missing:
                raise ValueError(f"reset(**row): the row has no {' or '.join(missing)}; "
                                 "rows of clinenv.integrations.trl.task_dataset carry "
                                 "case_id and seed")
            if row.get("env_id", env_id) != env_id:
                raise ValueError(f"reset(**row): the row is for {row['env_id']!r}, this "
                                 f"environment is {env_id!r}")
            return self._episode.reset(row["case_id"], int(row["seed"]),
                                       max_rounds=row.get("max_rounds"))

        def ask_patient(self, question: str) -> str:
            return self._episode.ask_patient(question)

        def order_exam(self, exam: str) -> str:
            return self._episode.order_exam(exam)

        def submit_diagnosis(self, diagnosis: str) -> str:
            return self._episode.submit_diagnosis(diagnosis)

        def list_exams(self) -> str:
            return self._episode.list_exams()

        def get_reward(self) -> float:
            """The spec's reward of the episode, finished or cut off (the factory's
            docstring)."""
            return self._episode.episode_reward()

        def _reward_components(self) -> RewardComponents:
            """The components of the episode so far (not a tool: private)."""
            return self._episode.reward_components()

        def _text_answer_at_end(self, final_text: str | None) -> bool:
            """:meth:`~clinenv.integrations.tools.ToolEpisode.text_answer_at_end` (not a
            tool: private)."""
            return self._episode.text_answer_at_end(final_text)

    for name in ("ask_patient", "order_exam", "submit_diagnosis", "list_exams"):
        getattr(ClinenvToolEnv, name).__doc__ = tool_docstring(name)
    ClinenvToolEnv.__qualname__ = ClinenvToolEnv.__name__ = "ClinenvToolEnv"
    return ClinenvToolEnv


class ComponentReward:
    """A TRL reward function that returns one reward component of each rollout's
    episode (:func:`component_reward_funcs`); picklable, named after its component
    (``__name__``, which TRL's column takes).

    Called as TRL calls reward functions (``prompts``, ``completions``, the row columns
    and ``environments``, the rollouts' environment instances): returns one value per
    rollout, a float, or ``None`` where the component is undefined or the rollout's
    environment is not a clinenv one (a multi-environment ``environment_factory``).

    Args:
        name: a component of :data:`~clinenv.reward_components.COMPONENTS`.

    Raises:
        ValueError: an unknown component; called without ``environments`` (not
            ``GRPOTrainer(environment_factory=make_env_factory(...))``: trl 1.16's
            ``AsyncGRPOTrainer`` passes none and ignores ``reward_weights``).
    """

    def __init__(self, name: str) -> None:
        if name not in COMPONENTS:
            raise ValueError(f"unknown component {name!r}; the components are "
                             f"{', '.join(COMPONENTS)}")
        self.name = name
        self.__name__ = name

    def __call__(self, *args: Any, environments: Sequence[Any] | None = None,
                 **kwargs: Any) -> list[float | None]:
        if environments is None:
            raise ValueError(f"reward function {self.name!r} reads the rollouts' clinenv "
                             "environments: use GRPOTrainer(environment_factory="
                             "make_env_factory(...)) (AsyncGRPOTrainer passes no "
                             "environments and ignores reward_weights)")
        values: list[float | None] = []
        for env in environments:
            read = getattr(env, "_reward_components", None)
            value = read()[self.name] if callable(read) else None
            values.append(None if value is None else float(value))
        return values

    def __repr__(self) -> str:
        return f"ComponentReward({self.name!r})"


class TextAnswerAtEnd:
    """A TRL reward function, meant for weight 0, that logs ``text_answer_at_end``: 1.0
    for a rollout that ended (TRL stops at a completion without a tool call) with text
    rather than a ``submit_diagnosis`` call and no final answer scored, else 0.0
    (:meth:`~clinenv.integrations.tools.ToolEpisode.text_answer_at_end`); ``None`` for
    an environment that is not a clinenv one. Such rollouts earn the reward of a cut-off
    episode even when the text names the right diagnosis::

        funcs = [*component_reward_funcs(), TextAnswerAtEnd()]
        GRPOConfig(..., reward_weights=[0.0] * len(funcs))   # rewards/text_answer_at_end/mean

    Raises:
        ValueError: called without ``environments`` (as :class:`ComponentReward`).
    """

    __name__ = "text_answer_at_end"

    def __call__(self, *args: Any, completions: Sequence[Any] | None = None,
                 environments: Sequence[Any] | None = None, **kwargs: Any
                 ) -> list[float | None]:
        if environments is None:
            raise ValueError("reward function 'text_answer_at_end' reads the rollouts' "
                             "clinenv environments: use GRPOTrainer(environment_factory="
                             "make_env_factory(...))")
        completions = list(completions if completions is not None else
                           (args[1] if len(args) > 1 else [None] * len(environments)))
        values: list[float | None] = []
        for completion, env in zip(completions, environments, strict=True):
            read = getattr(env, "_text_answer_at_end", None)
            values.append(float(read(_final_text(completion))) if callable(read) else None)
        return values

    def __repr__(self) -> str:
        return "TextAnswerAtEnd()"


def _final_text(completion: Any) -> str | None:
    """The text of a rollout's last assistant message when it carries no tool call
    (TRL's conversational completion: a list of messages; a plain string as it is)."""
    if isinstance(completion, str):
        return completion
    if not completion:
        return None
    last = completion[-1]
    if not isinstance(last, dict) or last.get("role") != "assistant" or last.get("tool_calls"):
        return None
    content = last.get("content")
    if isinstance(content, list):  # typed content blocks
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else None


def component_reward_funcs(names: Sequence[str] = COMPONENTS) -> list[ComponentReward]:
    """One TRL reward function per component (default: every one of
    :data:`~clinenv.reward_components.COMPONENTS`, in order), to pass as
    ``reward_funcs`` with ``GRPOConfig(reward_weights=[0.0] * len(funcs))``: TRL then
    logs ``rewards/<component>/mean`` and ``/std`` per step (undefined values left
    out) and the reward stays the environment's ``get_reward`` (docs/training.md).

    Raises:
        ValueError: an unknown or repeated component name.
    """
    names = list(names)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"component_reward_funcs: {', '.join(repeated)} named twice")
    return [ComponentReward(name) for name in names]


def _patient_cache(value: Any) -> PatientReplyCache | None:
    """The cache ``make_env_factory(patient_cache=value)`` shares (its docstring)."""
    if value is None or value is False:
        return None
    if value is True:
        return PatientReplyCache()
    if isinstance(value, PatientReplyCache):
        return value
    if isinstance(value, str | Path):
        return PatientReplyCache(value)
    raise TypeError("patient_cache must be None, a bool, a PatientReplyCache or a path, "
                    f"got {type(value).__name__}")


def task_dataset(env_id: str, split: str | Path | Sequence[str] | None = None, *,
                 seed: int = 0, exclude_flags: Sequence[str] = (),
                 order: str = "dataset", difficulty: Any = None, **env_kwargs: Any):
    """The GRPO task rows of ``env_id`` as a ``datasets.Dataset``, one per case.

    Columns: ``prompt`` (:func:`task_prompt`), ``case_id``, ``seed`` and ``env_id``
    (:func:`~clinenv.integrations.tools.task_rows`); ``excluded`` and
    ``info.description`` say which cases ``exclude_flags`` left out.

    Args:
        env_id: an EGIP text environment id.
        split, seed, exclude_flags, order, difficulty: as
            :func:`~clinenv.integrations.tools.task_rows`.
        **env_kwargs: as for :func:`make_env_factory` (``data_dir``...).

    Raises:
        ImportError: ``datasets`` is not installed.
        clinenv.case_list.CaseListError: as :func:`~clinenv.integrations.tools.task_rows`.
        ValueError: as :func:`~clinenv.integrations.tools.task_rows` and
            :func:`make_env_factory`.
        gymnasium.error.Error: as :func:`make_env_factory`.
    """
    try:
        from datasets import Dataset, DatasetInfo
    except ImportError as err:
        raise ImportError("task_dataset needs `datasets`: pip install -e '.[trl]' "
                          "from a clone") from err
    rows = task_rows(env_id, split, seed=seed, exclude_flags=exclude_flags, order=order,
                     difficulty=difficulty, **env_kwargs)
    prompt = task_prompt()
    dataset = Dataset.from_list([{"prompt": prompt, **row} for row in rows],
                                info=DatasetInfo(description=rows.note))
    dataset.excluded = rows.excluded
    return dataset


def task_prompt() -> list[dict[str, str]]:
    """The prompt of a TRL task row (:func:`task_dataset`): the system message
    :data:`~clinenv.integrations.tools.TOOL_SYSTEM_PROMPT`, then the user message
    :data:`TASK_INTRO`, to which ``reset(**row)`` appends the opening text. A row built
    by hand (from exported episodes, say) takes this prompt, never one that holds the
    opening already: TRL would append it a second time."""
    return [{"role": "system", "content": TOOL_SYSTEM_PROMPT},
            {"role": "user", "content": TASK_INTRO}]
