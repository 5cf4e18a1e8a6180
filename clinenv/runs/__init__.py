"""Running episodes: one episode, a logged run under an executor, and replay.

Main exports, loaded on first use: :func:`run`, :class:`RunSpec`, :class:`Serial`,
:class:`Concurrent`, :func:`run_episode`, :func:`prepare_run`, :func:`replay_run`.
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
