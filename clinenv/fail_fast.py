"""Fail fast: when a logged run stops instead of writing more error lines.

A model backend that still fails after its retries ends one episode as an error line
(:mod:`clinenv.episode`) and the run goes on, so a short outage costs a few episodes that
a resume runs again. Two kinds of failure do not pass, and going on would turn every
scheduled episode into an error line within seconds:

- **configuration**: the server refused the request itself — ``detail`` in
  :data:`NON_RETRYABLE_DETAILS` (HTTP 400, 401, 403, 404, 422: a wrong URL, model name,
  API key or request shape). Every later request would be refused the same way, so the
  run stops at once. The episode that met the refusal gets no line (a resume runs it);
- **outage**: ``max_consecutive_errors`` episodes in a row, in the order they finish,
  are error lines (timeouts, connection refused, 5xx after the retries). Their lines are
  written (a resume runs them again), then the run stops.

Either way the runner (:func:`clinenv.rollouts.run_logged`,
:func:`clinenv.concurrent.run_concurrent`) raises :class:`RunAborted` once the log holds
only whole lines: the lines written before stay, no new episode starts, and with
concurrency the episodes in flight are cancelled without a line.
"""

from __future__ import annotations

import asyncio
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
    """A logged run stopped early (module docstring); the log keeps whole lines only.

    Attributes:
        reason: ``"configuration"`` (a non-retryable backend error) or ``"outage"``
            (``max_consecutive_errors`` error episodes in a row).
        error: the ``error`` field (``{"type", "message", "backend", "detail"}``) of the
            episode that decided it.
        case_id: that episode's case.
        n_errors_in_a_row: error episodes in a row at the stop (1 for a configuration
            error, whose episode has no line).
        n_written: lines written by this run before it stopped.
        out: the log file.
    """

    def __init__(self, *, reason: str, error: Mapping[str, Any], case_id: Any,
                 n_errors_in_a_row: int, n_written: int, out: Path) -> None:
        self.reason = reason
        self.error = dict(error)
        self.case_id = case_id
        self.n_errors_in_a_row = n_errors_in_a_row
        self.n_written = n_written
        self.out = out
        detail = self.error.get("detail") or self.error.get("type")
        if reason == "configuration":
            head = (f"the model backend refused a request ({detail}; a configuration "
                    "problem, not an outage)")
        else:
            head = (f"{n_errors_in_a_row} episode(s) in a row stopped by a backend error "
                    f"(last: {detail}); the model server seems to be down")
        super().__init__(f"{head}: {self.error.get('message', '')}; the run stopped, "
                         f"{out} keeps the {n_written} episode(s) it wrote; resume it to "
                         "continue (resume=True, or clinenv run --resume)")


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

    Attributes:
        out: the log file (for the messages).
        max_consecutive_errors: error episodes in a row that stop the run (>= 1), or
            ``None`` for never.
        in_a_row: error lines written in a row so far.
        n_written: lines written so far.
        stopped: set once the run must stop; concurrent workers then take no new episode.
    """

    out: Path
    max_consecutive_errors: int | None = DEFAULT_MAX_CONSECUTIVE_ERRORS
    in_a_row: int = 0
    n_written: int = 0
    stopped: bool = False

    def __post_init__(self) -> None:
        check_max_consecutive_errors(self.max_consecutive_errors)

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
