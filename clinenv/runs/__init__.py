"""Running episodes: one episode, a logged run under an executor, and replay.

- :mod:`~clinenv.runs.execute` — :func:`run` / :func:`arun`, the one way to run a logged
  run: ``run(make_env, make_doctor, spec, executor)``;
- :mod:`~clinenv.runs.spec` — :class:`~clinenv.runs.spec.RunSpec`, what a logged run is
  (log file, schedule, resume and fail-fast rules), the only carrier of its settings;
- :mod:`~clinenv.runs.episode` — one episode of a doctor in an environment
  (:func:`run_episode`; :func:`arun_episode` awaits the doctor and the environment);
- :mod:`~clinenv.runs.logged` — the plan, the resume checks and the :class:`Serial`
  executor; :mod:`~clinenv.runs.concurrent` — the :class:`Concurrent` executor (Ray's is
  :class:`clinenv.distributed.Ray`);
- :mod:`~clinenv.runs.fail_fast` — the abort rule for consecutive backend errors;
- :mod:`~clinenv.runs.replay` (source checks, ablations) and
  :mod:`~clinenv.runs.replaying` (:func:`replay_run` / :func:`areplay_run`, under the
  same ``Serial`` and ``Concurrent`` executors) — decisions replayed on logged evidence.

The run-log line format both runs and :mod:`clinenv.evaluation` rely on is
:mod:`clinenv.runlog`; episode seeds are :mod:`clinenv.seeding`; a run's totals
(accuracy, coverage, model calls) are :mod:`clinenv.evaluation.summary`.

The run functions: :func:`run` / :func:`arun` (a logged run) and :func:`replay_run` /
:func:`areplay_run` (a replay), each with a :class:`~clinenv.runs.spec.RunSpec` and an
executor; :func:`run_episode` / :func:`arun_episode` (one episode, for a caller that
drives its own loop, as the Ray runners do); :func:`prepare_run` (the plan and resume
checks every executor starts with). The public names below import from this package
(``from clinenv.runs import run, replay_run, RunSpec``), each loaded on first use.
"""

from clinenv.lazy import lazy_exports

#: Public names -> the module that defines them, imported on first use.
_EXPORTS = {
    "RunSpec": "clinenv.runs.spec",
    "arun": "clinenv.runs.execute", "run": "clinenv.runs.execute",
    "run_episode": "clinenv.runs.episode",
    "Concurrent": "clinenv.runs.concurrent", "arun_episode": "clinenv.runs.concurrent",
    "PreparedRun": "clinenv.runs.logged", "RunResult": "clinenv.runs.logged",
    "Serial": "clinenv.runs.logged",
    "episode_seed": "clinenv.runs.logged", "plan_episodes": "clinenv.runs.logged",
    "prepare_run": "clinenv.runs.logged",
    "FailFast": "clinenv.runs.fail_fast", "RunAborted": "clinenv.runs.fail_fast",
    "ReplayResult": "clinenv.runs.replaying", "areplay_run": "clinenv.runs.replaying",
    "replay_run": "clinenv.runs.replaying",
    "ReplayError": "clinenv.runs.replay",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
