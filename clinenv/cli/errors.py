"""The user-facing error and the exit codes of the ``clinenv`` command line.

Errors are one line on stderr, never a traceback. Exit codes: 0 success, then the
constants below.
"""

from __future__ import annotations

#: ``data verify`` found a present file with a wrong checksum or record count.
EXIT_VERIFY_FAILED = 1
#: Bad arguments, a missing or corrupt dataset, a log that cannot be continued, an
#: ``--out`` that would be overwritten, or a run stopped early (fail fast).
EXIT_USAGE = 2
#: Exit code of a ``clinenv run`` that finished with error episodes (backend errors).
EXIT_RUN_ERRORS = 3
#: Interrupted (Ctrl-C).
EXIT_INTERRUPTED = 130
#: stdout closed early (e.g. piped into ``head``).
EXIT_BROKEN_PIPE = 141


class CLIError(Exception):
    """A user-facing error: printed as ``clinenv: error: <message>``, exit ``code``.

    Args:
        message: one line naming the option or file at fault.
        code: the exit code (default :data:`EXIT_USAGE`, 2).
    """

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code
