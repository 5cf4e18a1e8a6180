"""Fail fast: when a logged run stops instead of writing more error lines.

A refused request (:data:`NON_RETRYABLE_DETAILS`) or ``max_consecutive_errors`` error
lines in a row raise :class:`RunAborted` (docs/api/runs.md).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinenv.errors import ClinenvError
from clinenv.runlog import is_error_line

__all__ = [
    "DEFAULT_MAX_CONSECUTIVE_ERRORS", "FailFast", "NON_RETRYABLE_DETAILS", "RunAborted",
    "check_max_consecutive_errors",
]

#: ``BackendError.detail`` values that mean a configuration problem, not an outage.
NON_RETRYABLE_DETAILS = frozenset({"http_400", "http_401", "http_403", "http_404",
                                   "http_422"})
#: Error episodes in a row after which a run stops as an outage.
DEFAULT_MAX_CONSECUTIVE_ERRORS = 5


class RunAborted(ClinenvError):
    """A logged run stopped early, on a refused request or too many error episodes in a
    row (docs/api/runs.md, *Fail fast*); the log keeps whole lines only.

    Attributes:
        reason: ``"configuration"`` (a non-retryable backend error) or ``"outage"``
            (``max_consecutive_errors`` error episodes in a row).
        error: the ``error`` field (``{"type", "message", "backend", "detail"}``) of the
            episode that decided it.
        case_id: that episode's case.
        n_errors_in_a_row: error episodes in a row at the stop (1 for a configuration
            error, whose episode has no line).
        n_written: lines written by this run before it stopped (recounted from the log
            file by :meth:`FailFast.recount`).
        out: the log file.
        n_error_episodes: episodes of the log whose latest line is an error line, this
            run's and earlier runs' (``None`` until recounted): what a resume runs again.
        n_error_episodes_this_run: those of them whose error line this run wrote
            (``None`` until recounted).
    """

    def __init__(self, *, reason: str, error: Mapping[str, Any], case_id: Any,
                 n_errors_in_a_row: int, n_written: int, out: Path) -> None:
        self.reason = reason
        self.error = dict(error)
        self.case_id = case_id
        self.n_errors_in_a_row = n_errors_in_a_row
        self.n_written = n_written
        self.out = out
        self.n_error_episodes: int | None = None
        self.n_error_episodes_this_run: int | None = None
        super().__init__(reason)

    def error_note(self) -> str:
        """``"; the log holds N episode(s) stopped by a backend error (M written now)"``
        once recounted and N > 0, else ``""``."""
        if not self.n_error_episodes:
            return ""
        now = self.n_error_episodes_this_run
        return (f"; {self.out} holds {self.n_error_episodes} episode(s) stopped by a "
                f"backend error ({now} of them from this run)")

    def __str__(self) -> str:
        detail = self.error.get("detail") or self.error.get("type")
        if self.reason == "configuration":
            head = (f"the model backend refused a request ({detail}; a configuration "
                    "problem, not an outage)")
        else:
            head = (f"{self.n_errors_in_a_row} episode(s) in a row stopped by a backend "
                    f"error (last: {detail}); the model server seems to be down")
        return (f"{head}: {self.error.get('message', '')}; the run stopped, {self.out} "
                f"keeps the {self.n_written} episode(s) it wrote{self.error_note()}; "
                "resume it to continue (resume=True, or clinenv run --resume)")


def check_max_consecutive_errors(value: int | None) -> int | None:
    """``value`` if it is ``None`` (never stop on an outage) or an integer >= 1.

    Raises:
        ValueError: anything else (the message names ``max_consecutive_errors``).
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 1):
        raise ValueError(f"max_consecutive_errors must be an integer >= 1 or None, "
                         f"got {value!r}")
    return value


@dataclass
class FailFast:
    """The fail-fast rule of one run: call :meth:`before_write` with each new episode
    record, write its line, then call :meth:`after_write` with the line.

    Use it as a context manager around the writing (``with guard, RunLogWriter(out)
    as writer:``, entered after the log was checked and repaired): a :class:`RunAborted`
    leaving the block is recounted from the file (:meth:`recount`).

    Attributes:
        out: the log file (for the messages).
        max_consecutive_errors: error episodes in a row that stop the run (>= 1), or
            ``None`` for never.
        in_a_row: error lines written in a row so far.
        n_written: lines written so far.
        stopped: set once the run must stop; concurrent workers then take no new episode.
        start_size: size in bytes of the log when the block was entered (its lines
            before are earlier runs').
    """

    out: Path
    max_consecutive_errors: int | None = DEFAULT_MAX_CONSECUTIVE_ERRORS
    in_a_row: int = 0
    n_written: int = 0
    stopped: bool = False
    start_size: int = 0

    def __post_init__(self) -> None:
        check_max_consecutive_errors(self.max_consecutive_errors)

    def __enter__(self) -> FailFast:
        self.start_size = self.out.stat().st_size if self.out.is_file() else 0
        return self

    def __exit__(self, kind: Any, err: BaseException | None, tb: Any) -> None:
        if isinstance(err, RunAborted):
            self.recount(err)

    def recount(self, err: RunAborted) -> RunAborted:
        """Set ``err``'s counts from the log file as it is now: ``n_written`` (the lines
        this run wrote, one whose write was under way when another worker stopped the
        run included), ``n_error_episodes`` and ``n_error_episodes_this_run``. A log
        that cannot be read keeps the counts kept while writing. Returns ``err``."""
        try:
            data = self.out.read_bytes()
        except OSError:
            return err
        before = data[:self.start_size].count(b"\n")
        latest: dict[tuple[Any, Any], tuple[int, bool]] = {}
        written = 0
        for number, raw in enumerate(data.split(b"\n"), start=1):
            try:
                line = json.loads(raw)
            except ValueError:  # a blank line, or a partial last line
                continue
            if not isinstance(line, dict):
                continue
            written += number > before
            key = (line.get("case_id"), line.get("repetition"))
            latest[key] = (number, is_error_line(line))
        errors = [number for number, error in latest.values() if error]
        err.n_written = written
        err.n_error_episodes = len(errors)
        err.n_error_episodes_this_run = sum(number > before for number in errors)
        return err

    def before_write(self, record: Mapping[str, Any]) -> None:
        """Stop before writing an episode that met a non-retryable backend error.

        Raises:
            RunAborted: ``reason="configuration"``; the record must not be written.
        """
        error = record.get("error")
        if isinstance(error, Mapping) and error.get("detail") in NON_RETRYABLE_DETAILS:
            self.stopped = True
            raise RunAborted(reason="configuration", error=error,
                             case_id=record.get("case_id"), n_errors_in_a_row=1,
                             n_written=self.n_written, out=self.out)

    def after_write(self, line: Mapping[str, Any]) -> None:
        """Count a written line; stop after ``max_consecutive_errors`` error lines in a
        row (a finished episode resets the count).

        Raises:
            RunAborted: ``reason="outage"``.
        """
        self.n_written += 1
        self.in_a_row = self.in_a_row + 1 if is_error_line(line) else 0
        limit = self.max_consecutive_errors
        if limit is not None and self.in_a_row >= limit:
            self.stopped = True
            raise RunAborted(reason="outage", error=line["error"],
                             case_id=line.get("case_id"), n_errors_in_a_row=self.in_a_row,
                             n_written=self.n_written, out=self.out)

    async def run_workers(self, worker: Callable[[int], Awaitable[None]], n: int) -> None:
        """Run ``worker(0)`` .. ``worker(n - 1)`` at once and wait for all of them.

        A worker's exception (a :class:`RunAborted` stop included) sets :attr:`stopped`,
        cancels the workers still running (their episodes in flight get no line), waits
        for them, then is re-raised; the log keeps only whole lines.
        """
        tasks = [asyncio.ensure_future(worker(i)) for i in range(n)]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            self.stopped = True
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
