"""TRL adapter: clinenv as a ``GRPOTrainer(environment_factory=...)`` environment.

Install with ``pip install 'clinenv[trl]'`` (``trl>=1.16``, ``datasets``). Importing
this module and calling :func:`make_env_factory` needs neither; :func:`task_dataset`
needs ``datasets``.

TRL (``trl/trainer/grpo_trainer.py``) builds one instance per rollout with the no-arg
factory and reuses it; before each rollout it calls ``reset(**row)`` with every column
of the dataset row and appends the returned text to the row's last user message; every
public method other than ``reset`` and ``get_reward`` becomes a tool, whose JSON schema
transformers builds from the type hints and the Google-style docstring; a tool that
raises is answered ``{"error": message}``; ``get_reward()`` is a reward column. GRPO
groups repeat a row, so a row pins its episode: ``(env_id, case_id, seed)`` gives the
same opening text in any process. The tools are those of
:mod:`clinenv.integrations.tools`, whose :class:`~clinenv.integrations.tools.ToolEpisode`
does the work.

TRL's async trainer calls ``reset`` and the tools from thread pools: each instance owns
its environment and lock, and instances share only the optional LLM-patient reply cache
(``patient_cache=``), whose store is guarded by its own lock.
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

__all__ = ["TASK_INTRO", "make_env_factory", "task_dataset"]


def make_env_factory(env_id: str, *,
                     patient_cache: bool | PatientReplyCache | str | Path | None = None,
                     **env_kwargs: Any) -> type:
    """A class for ``GRPOTrainer(environment_factory=...)`` over ``env_id``.

    Instances: ``reset(**row) -> str`` (reads ``case_id`` and ``seed``, checks ``env_id``
    when the row has one, ignores the other columns), the tools ``ask_patient``,
    ``order_exam``, ``submit_diagnosis`` and ``list_exams`` (each returns its result
    text; raises ``ValueError`` after the episode ended, before any reset, or on a call
    the tool view refuses), and ``get_reward() -> float`` (the episode's return: the
    terminal score with the default zero costs, ``0.0`` while unanswered). The class
    attribute ``patient_cache`` is the shared cache (``None`` when off); it is no method,
    so TRL does not make it a tool.

    Args:
        env_id: an EGIP text environment id, e.g. ``"EGIP-Demo-v0"``.
        patient_cache: the LLM patient's reply cache (opt-in,
            :mod:`clinenv.agents.patient_cache`), so that the rollouts of a repeated
            row hear the same patient: ``None`` or ``False`` (off), ``True`` (one
            in-memory cache shared by every instance of the returned class), a
            :class:`~clinenv.agents.patient_cache.PatientReplyCache` (shared as given),
            or a path (a ``.jsonl`` cache file, loaded when it exists and appended to).
            Each instance wraps its environment's LLM patient (``patient="llm"``) in a
            :class:`~clinenv.agents.patient_cache.CachedPatient` over it; another
            patient is left as it is.
        **env_kwargs: environment settings, as for ``gym.make`` (``data_dir``,
            ``acquisition_rounds``, ``patient="llm"`` with ``patient_model=``...); each
            instance builds its own environment (and patient) from them, so pass seats
            by name, not as shared objects.

    Raises:
        TypeError: ``patient_cache`` of another type.
        ValueError: a cache file that does not parse (file, line and field named); as
            :class:`~clinenv.integrations.tools.ToolEpisode`.
        gymnasium.error.Error: as :class:`~clinenv.integrations.tools.ToolEpisode`
            (checked here, at once, by building one environment).
    """
    cache = _patient_cache(patient_cache)
    ToolEpisode(env_id, **env_kwargs)  # fail here, not inside the trainer

    class ClinenvToolEnv:
        """One clinenv episode per rollout, through the tool view."""

        patient_cache = cache

        def __init__(self) -> None:
            self._episode = ToolEpisode(env_id, patient_cache=cache, **env_kwargs)

        def reset(self, **row: Any) -> str:
            """Start the row's episode; returns the doctor's opening text.

            Raises:
                ValueError: the row has no ``case_id`` or ``seed``, or names another
                    ``env_id``.
            """
            missing = [key for key in ("case_id", "seed") if row.get(key) is None]
            if missing:
                raise ValueError(f"reset(**row): the row has no {' or '.join(missing)}; "
                                 "rows of clinenv.integrations.trl.task_dataset carry "
                                 "case_id and seed")
            if row.get("env_id", env_id) != env_id:
                raise ValueError(f"reset(**row): the row is for {row['env_id']!r}, this "
                                 f"environment is {env_id!r}")
            return self._episode.reset(row["case_id"], int(row["seed"]))

        def ask_patient(self, question: str) -> str:
            return self._episode.ask_patient(question)

        def order_exam(self, exam: str) -> str:
            return self._episode.order_exam(exam)

        def submit_diagnosis(self, diagnosis: str) -> str:
            return self._episode.submit_diagnosis(diagnosis)

        def list_exams(self) -> str:
            return self._episode.list_exams()

        def get_reward(self) -> float:
            """The episode's return (0.0 until the final answer is scored)."""
            return self._episode.reward

    for name in ("ask_patient", "order_exam", "submit_diagnosis", "list_exams"):
        getattr(ClinenvToolEnv, name).__doc__ = tool_docstring(name)
    ClinenvToolEnv.__qualname__ = ClinenvToolEnv.__name__ = "ClinenvToolEnv"
    return ClinenvToolEnv


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
                 seed: int = 0, **env_kwargs: Any):
    """The GRPO task rows of ``env_id``: one per case, in dataset order.

    Columns: ``prompt`` (a system message with :data:`~clinenv.integrations.tools.
    TOOL_SYSTEM_PROMPT` and the user message :data:`TASK_INTRO`; ``reset`` adds the
    opening text), ``case_id``, ``seed`` (``episode_seed(seed, 0, case index)``, the seed
    ``clinenv run --seed`` gives repetition 0 of that case) and ``env_id``.

    Args:
        env_id: an EGIP text environment id.
        split: ``None`` (every case), a case-list file (one id per line, as ``clinenv
            data split`` writes), or a sequence of case ids.
        seed: the run seed the row seeds derive from (>= 0).
        **env_kwargs: as for :func:`make_env_factory` (``data_dir``...).

    Raises:
        ImportError: ``datasets`` is not installed.
        clinenv.case_list.CaseListError: an unreadable list, an id listed twice, or one
            the dataset lacks (file, line and the nearest id named).
        ValueError, gymnasium.error.Error: as :func:`make_env_factory`.
    """
    try:
        from datasets import Dataset
    except ImportError as err:
        raise ImportError("task_dataset needs `datasets`: pip install 'clinenv[trl]'") from err
    prompt = [{"role": "system", "content": TOOL_SYSTEM_PROMPT},
              {"role": "user", "content": TASK_INTRO}]
    return Dataset.from_list([{"prompt": prompt, **row}
                              for row in task_rows(env_id, split, seed=seed, **env_kwargs)])

