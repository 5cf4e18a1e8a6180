"""OpenEnv adapter: clinenv served over OpenEnv 0.10 (``clinenv[openenv]``).

Source: the ``openenv`` 0.10.0 wheel (``openenv.core.env_server``). The wire format,
observations and errors: docs/training.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import numbers
import re
import threading
import uuid
import weakref
from typing import Any

try:
    from fastmcp import FastMCP
    from openenv.core.client_types import StepResult
    from openenv.core.env_client import EnvClient
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.env_server.types import Action, ConcurrencyConfig, Observation, State
except ImportError as err:  # pragma: no cover - exercised without the extra
    from clinenv.errors import install_hint

    raise ImportError("clinenv.integrations.openenv needs openenv 0.10: "
                      + install_hint("openenv")) from err
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from clinenv.integrations.tools import TOOL_NAMES, ToolEpisode, tool_docstring
from clinenv.reward_components import RewardComponents

__all__ = ["INFO_KEYS", "OUTCOME_KEYS", "ActionTooLongError", "ClinAction", "ClinObservation",
           "ClinOpenEnv", "ClinenvClient", "NoEpisodeError", "create_clin_app",
           "make_remote_env_factory"]

log = logging.getLogger(__name__)

#: The doctor's ``info`` keys copied into an observation's metadata (all doctor-visible).
INFO_KEYS = ("case_id", "dataset", "phase", "turn", "menu", "candidates",
             "n_exams_requested", "invalid_actions", "action_kind", "text_clipped",
             "action_flags")
#: The outcome keys added at the end (the doctor's answer and its verdict; no target).
OUTCOME_KEYS = ("answer", "scored_answer", "verdict", "correct", "abstained",
                "answer_status", "match_score", "scorer")


class NoEpisodeError(RuntimeError):
    """A step with no episode: reset first (HTTP ``/step`` never has one)."""


class ActionTooLongError(ValueError):
    """An action text longer than the environment's ``max_text_chars``."""


class ClinAction(Action):
    """One doctor action: ``text`` (the text protocol) or ``tool`` + ``arguments``.

    Raises:
        pydantic.ValidationError: both or neither of ``text`` and ``tool``; wrong types.
    """

    text: str | None = Field(default=None, description="action text (EGIP section 3.2)")
    tool: str | None = Field(default=None, description="tool name: " + ", ".join(TOOL_NAMES))
    arguments: dict[str, Any] = Field(default_factory=dict,
                                      description="the tool's arguments (with tool only)")

    @model_validator(mode="after")
    def _one_kind(self) -> ClinAction:
        # PydanticCustomError, not ValueError: OpenEnv 0.10's WebSocket handler sends
        # e.errors() as JSON, and a ValueError in its ctx is not serialisable (the
        # session would end with SESSION_ERROR instead of a VALIDATION_ERROR reply)
        if (self.text is None) == (self.tool is None):
            raise PydanticCustomError(
                "clin_action", "give exactly one of 'text' (an action of the text "
                "protocol) and 'tool' (with 'arguments')")
        if self.text is not None and self.arguments:
            raise PydanticCustomError("clin_action",
                                      "'arguments' go with 'tool', not with 'text'")
        return self


class ClinObservation(Observation):
    """The delta text; ``done``, ``reward`` (this step's, float) and ``metadata`` as in
    docs/training.md."""

    text: str = Field(default="", description="what is new since the last action")


def _check_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0 or absent, got {seed!r}")
    return int(seed)


def _json_int(value: Any) -> Any:
    """An integral value (``numpy.int64`` from a parquet row) as a plain ``int`` for the
    wire; anything else unchanged, for the server to refuse."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


class ClinOpenEnv(MCPEnvironment):
    """The server-side environment: one :class:`ToolEpisode` per session.

    Args:
        env_id: an EGIP text environment id (``"EGIP-MedQA-v0"``...).
        **env_kwargs: passed to ``gym.make`` through ToolEpisode (``env_config=``,
            ``data_dir=``, seats...); ``observation_format="delta"`` and
            ``premature_diagnosis="decide"`` are the tool view's.

    Raises:
        ValueError, gymnasium.error.Error: as :class:`ToolEpisode`.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, env_id: str, **env_kwargs: Any) -> None:
        self.session_id = uuid.uuid4().hex[:12]
        self._episode = ToolEpisode(env_id, **env_kwargs)
        self._seed: int | None = None
        self._episode_id: str | None = None
        self._steps = 0
        mcp = FastMCP("clinenv")
        for name in TOOL_NAMES:
            mcp.tool(name=name, description=getattr(ToolEpisode, name).__doc__)(
                getattr(self._episode, name))
        super().__init__(mcp)
        log.info("session %s open (%s)", self.session_id, env_id)

    # -- the trainer's API --------------------------------------------------------------
    def reset(self, seed: int | None = None, episode_id: str | None = None,
              case_id: str | int | None = None, max_rounds: int | None = None,
              **kwargs: Any) -> ClinObservation:
        """Start an episode; pins the case as ``gym.make``'s reset does (docs/training.md);
        ``max_rounds`` caps its acquisition rounds (the reset option of
        :meth:`clinenv.env.EGIPEnv.reset`, a curriculum row's round budget).

        Raises:
            ValueError: an unknown keyword, a bad seed, an unknown case id or index, a
                bad ``max_rounds`` (not an int in 1..acquisition_rounds).
        """
        if kwargs:
            raise ValueError(f"unknown reset argument(s): {sorted(kwargs)}; allowed: "
                             "seed, episode_id, case_id, max_rounds")
        seed = _check_seed(seed)
        if case_id is not None and (isinstance(case_id, bool)
                                    or not isinstance(case_id, str | int)):
            raise ValueError(f"case_id must be a case id string or a 0-based index, "
                             f"got {case_id!r}")
        if seed is None:  # the environment's own generator, as an unseeded gym reset
            seed = int(self._episode.env.np_random.integers(2**31))
        try:
            text = self._episode.reset(case_id, seed, max_rounds=max_rounds)
        except (KeyError, IndexError) as err:
            log.info("session %s error: unknown case", self.session_id)
            raise ValueError(f"unknown case: {case_id!r} ({type(err).__name__})") from None
        self._seed, self._steps = seed, 0
        self._episode_id = episode_id or uuid.uuid4().hex
        return self._observation(text, reward=None)

    def _step_impl(self, action: Action, timeout_s: float | None = None,
                   **kwargs: Any) -> ClinObservation:
        if not isinstance(action, ClinAction):
            raise ValueError(f"expected a ClinAction, got {type(action).__name__}")
        if not self._episode.started:
            raise NoEpisodeError("no episode in this session: reset first (HTTP POST /step "
                                 "is stateless, a fresh environment per request; play "
                                 "episodes over the WebSocket /ws)")
        limit = self._episode.env.max_text_chars
        if action.text is not None and len(action.text) > limit:
            raise ActionTooLongError(f"action text is {len(action.text)} characters; this "
                                     f"environment's max_text_chars is {limit}")
        before = self._episode.reward
        try:
            if action.text is not None:
                text = self._episode.step_text(action.text)
            else:
                text = self._episode.call(action.tool, action.arguments)
        except (ValueError, TypeError):
            log.info("session %s error: action refused", self.session_id)
            raise
        self._steps += 1
        return self._observation(text, reward=self._episode.reward - before)

    @property
    def state(self) -> State:
        """``episode_id``, ``step_count``, and once reset ``case_id``, ``seed``,
        ``phase``, ``done``, ``episode_reward`` (finished or cut off:
        :meth:`ToolEpisode.episode_reward`, what TRL's ``get_reward`` reports) and
        ``reward_components`` (so far, as a dict)."""
        extra: dict[str, Any] = {}
        if self._episode.started:
            info = self._episode.info
            extra = {"case_id": info.get("case_id"), "seed": self._seed,
                     "phase": info.get("phase"), "done": self._episode.done,
                     "episode_reward": self._episode.episode_reward(),
                     "reward_components": self._episode.reward_components().to_dict()}
        return State(episode_id=self._episode_id, step_count=self._steps, **extra)

    def close(self) -> None:
        """Close the gym environment (idempotent)."""
        if getattr(self, "_episode", None) is not None:
            self._episode.env.close()
            self._episode = None  # type: ignore[assignment]
            log.info("session %s close", self.session_id)
        super().close()

    def _observation(self, text: str, *, reward: float | None) -> ClinObservation:
        info = self._episode.info
        meta = {key: info[key] for key in INFO_KEYS if key in info}
        meta.update(seed=self._seed, episode_id=self._episode_id, session=self.session_id)
        done = self._episode.done
        if done:
            meta.update({key: info[key] for key in OUTCOME_KEYS if key in info})
            meta["reward_components"] = self._episode.env.reward_components().to_dict()
            meta["episode_reward"] = self._episode.reward
        return ClinObservation(text=text, done=done, reward=reward, metadata=meta)


def create_clin_app(env_id: str, env_config: Any = None, *, max_sessions: int = 64,
                    session_timeout_s: float | None = None, **env_kwargs: Any):
    """The FastAPI app serving ``env_id`` (OpenEnv's ``create_app``), for uvicorn.

    Args:
        env_id: an EGIP text environment id.
        env_config: a :class:`clinenv.env.EnvConfig` (``gym.make(ID, env_config=...)``);
            ``None``: the id's defaults.
        max_sessions: concurrent WebSocket sessions (>= 1); one more is refused with
            ``CAPACITY_REACHED``.
        session_timeout_s: idle sessions are closed after this many seconds; ``None``
            never.
        **env_kwargs: more ``gym.make`` keywords (seats, ``data_dir``, ``cases``...).

    Raises:
        ValueError: ``max_sessions`` < 1; environment errors at once (one environment is
            built and closed here, so a bad id or setting fails before serving).
    """
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ValueError(f"max_sessions must be an integer >= 1, got {max_sessions!r}")
    if env_config is not None:
        env_kwargs["env_config"] = env_config
    factory = functools.partial(ClinOpenEnv, env_id, **env_kwargs)
    factory().close()  # fail fast
    app = create_app(factory, ClinAction, ClinObservation, env_name="clinenv",
                     concurrency_config=ConcurrencyConfig(
                         max_concurrent_envs=max_sessions, session_timeout=session_timeout_s))
    from fastapi.responses import JSONResponse

    async def no_episode(request: Any, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=409, content={"detail": str(exc)})

    async def refused(request: Any, exc: Exception) -> JSONResponse:
        return JSONResponse(status_code=400, content={"detail": str(exc)})

    app.add_exception_handler(NoEpisodeError, no_episode)
    app.add_exception_handler(ValueError, refused)
    app.add_exception_handler(TypeError, refused)
    return app


class ClinenvClient(EnvClient[ClinAction, ClinObservation, State]):
    """OpenEnv client of a clinenv server: ``ClinenvClient(base_url).sync()`` then
    ``reset(seed=..., case_id=...)`` and ``step(ClinAction(text=...))`` (a ``str`` or a
    dict is accepted as the action too). Keyword arguments as OpenEnv's ``EnvClient``
    (``message_timeout_s``...).

    A receive that times out drops the connection (the next call opens a fresh one and
    a new session), so a late reply is never read as the next call's (OpenEnv #1143).
    """

    def _step_payload(self, action: ClinAction | str | dict[str, Any]) -> dict[str, Any]:
        if isinstance(action, str):
            return {"text": action}
        if isinstance(action, ClinAction):
            return action.model_dump(exclude_none=True, exclude_defaults=True)
        return dict(action)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ClinObservation]:
        obs = dict(payload.get("observation") or {})
        obs.pop("reward", None)
        obs.pop("done", None)
        observation = ClinObservation(done=bool(payload.get("done")),
                                      reward=payload.get("reward"), **obs)
        return StepResult(observation=observation, reward=payload.get("reward"),
                          done=bool(payload.get("done")), metadata=observation.metadata)

    def _parse_state(self, payload: dict[str, Any]) -> State:
        return State(**payload)

    async def _receive(self) -> dict[str, Any]:
        try:
            return await super()._receive()
        except (asyncio.TimeoutError, asyncio.CancelledError):
            ws = self._ws
            if ws is not None:  # an EnvClient that kept the socket: drop it here
                self._ws = None
                self._ws_loop = None
                self._schedule_socket_close(ws)
            raise


_SERVER_ERROR = re.compile(r"Server error: (?P<message>.*) \(code: (?P<code>\w+)\)", re.S)


def make_remote_env_factory(base_url: str, *, env_id: str | None = None,
                            message_timeout_s: float = 60.0,
                            connect_timeout_s: float = 10.0) -> type:
    """A class for ``GRPOTrainer(environment_factory=...)`` whose episodes run on a
    ``clinenv serve`` server, one WebSocket session per instance (docs/training.md).

    Instances behave as :func:`clinenv.integrations.trl.make_env_factory`'s, with the
    same tool schemas; a session is closed when its instance is garbage-collected.

    Args:
        base_url: the server, ``http://HOST:PORT`` (or ``ws://``).
        env_id: when given, a row naming another ``env_id`` is refused.
        message_timeout_s: seconds to wait for a reply; on a timeout the episode is lost.
        connect_timeout_s: seconds to open the connection.

    Raises:
        ConnectionError: the server does not answer ``GET /health``.
        ValueError (from instances): a row without ``case_id`` or ``seed`` or for another
            ``env_id``; a tool or ``get_reward`` before ``reset``; what the server refuses.
    """
    import httpx

    http_url = "http" + base_url[2:] if base_url.startswith(("ws://", "wss://")) else base_url
    try:
        httpx.get(http_url.rstrip("/") + "/health",
                  timeout=connect_timeout_s).raise_for_status()
    except httpx.HTTPError as err:  # fail here, not inside the trainer
        raise ConnectionError(f"no clinenv server at {base_url}: {err}") from None

    class ClinenvRemoteToolEnv:
        """One clinenv episode per rollout, played on the server."""

        def __init__(self) -> None:
            self._conn: dict[str, Any] = {}  # "client": the SyncEnvClient, once reset
            self._lock = threading.Lock()
            self._last: StepResult[ClinObservation] | None = None
            self._state: State | None = None
            weakref.finalize(self, _close_session, self._conn)

        def _call(self, message: str, *args: Any, **kwargs: Any) -> Any:
            client = self._conn.get("client")
            if client is None:
                client = ClinenvClient(base_url=base_url, message_timeout_s=message_timeout_s,
                                       connect_timeout_s=connect_timeout_s).sync()
                self._conn["client"] = client
            try:
                return getattr(client, message)(*args, **kwargs)
            except RuntimeError as err:
                found = _SERVER_ERROR.fullmatch(str(err))
                if found is None:
                    raise
                raise ValueError(found["message"]) from None

        def reset(self, **row: Any) -> str:
            """Start the row's episode on the server; returns the opening text.

            Raises:
                ValueError: the row has no ``case_id`` or ``seed``, names another
                    ``env_id``, or the server refuses the case or its ``max_rounds``.
            """
            missing = [key for key in ("case_id", "seed") if row.get(key) is None]
            if missing:
                raise ValueError(f"reset(**row): the row has no {' or '.join(missing)}; "
                                 "rows of clinenv.integrations.trl.task_dataset carry "
                                 "case_id and seed")
            if env_id is not None and row.get("env_id", env_id) != env_id:
                raise ValueError(f"reset(**row): the row is for {row['env_id']!r}, this "
                                 f"environment is {env_id!r}")
            with self._lock:
                self._last = self._state = None
                budget = ({} if row.get("max_rounds") is None
                          else {"max_rounds": _json_int(row["max_rounds"])})
                self._last = self._call("reset", seed=int(row["seed"]),
                                        case_id=row["case_id"], **budget)
                return self._last.observation.text

        def _tool(self, name: str, **arguments: Any) -> str:
            with self._lock:
                if self._last is None:
                    raise ValueError("no episode: call reset() first")
                self._state = None
                self._last = self._call("step", ClinAction(tool=name, arguments=arguments))
                return self._last.observation.text

        def ask_patient(self, question: str) -> str:
            return self._tool("ask_patient", question=question)

        def order_exam(self, exam: str) -> str:
            return self._tool("order_exam", exam=exam)

        def submit_diagnosis(self, diagnosis: str) -> str:
            return self._tool("submit_diagnosis", diagnosis=diagnosis)

        def list_exams(self) -> str:
            return self._tool("list_exams")

        def get_reward(self) -> float:
            """The server's reward of the episode, finished or cut off (the factory's
            docstring)."""
            last = self._last
            if last is not None and last.done:
                return float(last.observation.metadata["episode_reward"])
            return float(self._session_state().episode_reward)

        def _session_state(self) -> State:
            """The session's ``state`` after the last action (fetched once per action)."""
            with self._lock:
                if self._last is None:
                    raise ValueError("no episode: call reset() first")
                if self._state is None:
                    self._state = self._call("state")
                return self._state

        def _reward_components(self) -> RewardComponents:
            """The components of the episode so far (not a tool: private)."""
            last = self._last
            if last is not None and last.done:
                return RewardComponents.from_dict(last.observation.metadata["reward_components"])
            return RewardComponents.from_dict(self._session_state().reward_components)

        def _text_answer_at_end(self, final_text: str | None) -> bool:
            """As the in-process factory's (not a tool: private)."""
            if self._last is None:
                raise ValueError("no episode: call reset() first")
            return (not self._last.done and isinstance(final_text, str)
                    and bool(final_text.strip()))

    for name in TOOL_NAMES:
        getattr(ClinenvRemoteToolEnv, name).__doc__ = tool_docstring(name)
    return ClinenvRemoteToolEnv


def _close_session(conn: dict[str, Any]) -> None:
    """Close a remote factory instance's session: its socket, then its client's event
    loop thread. On that thread itself (a collection there), the close is scheduled and
    the loop stops when it is done."""
    client = conn.pop("client", None)
    if client is None:
        return
    loop, thread = client._loop, client._loop_thread
    if loop is None or thread is None or not thread.is_alive():
        return
    if threading.current_thread() is thread:
        task = loop.create_task(client.async_client._close_async())
        task.add_done_callback(lambda _: loop.stop())
        return
    with contextlib.suppress(Exception):
        client.close()  # SyncEnvClient.close: the socket, then the loop and its thread
