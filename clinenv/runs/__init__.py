"""Running episodes: one episode, logged and concurrent runs, and replay.

- :mod:`~clinenv.runs.spec` — :class:`~clinenv.runs.spec.RunSpec`, what a logged run is
  (log file, schedule, resume and fail-fast rules), shared by the run functions;
- :mod:`~clinenv.runs.episode` — one episode of a doctor in an environment;
- :mod:`~clinenv.runs.logged` — a run over cases and repetitions, logged and resumable;
- :mod:`~clinenv.runs.concurrent` — the same run with many episodes in flight;
- :mod:`~clinenv.runs.fail_fast` — the abort rule for consecutive backend errors;
- :mod:`~clinenv.runs.replay`, :mod:`~clinenv.runs.replay_run` — decisions replayed on
  logged evidence.

The run-log line format both runs and :mod:`clinenv.evaluation` rely on is
:mod:`clinenv.runlog`; episode seeds are :mod:`clinenv.seeding`; a run's totals
(accuracy, coverage, model calls) are :mod:`clinenv.evaluation.summary`.
"""
