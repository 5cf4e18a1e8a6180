"""The LLM doctor: a chat model as the doctor policy of :class:`clinenv.env.EGIPEnv`.

Acquisition replies are actions (EGIP section 3.2); e_T goes to a terminal strategy
(EGIP eq. 5). Formats, prompts, biases and seeds: docs/api/agents.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import field_validator

from clinenv.agents.chat_seat import check_seed
from clinenv.agents.prompts import (
    AGENTCLINIC_BUDGET_KNOWN,
    AGENTCLINIC_BUDGET_UNKNOWN,
    AGENTCLINIC_DOCTOR_SYSTEM,
    EGIP_DOCTOR_SYSTEM,
)
from clinenv.agents.terminal import make_strategy
from clinenv.agents.terminal_base import (
    CallRequest,
    Plan,
    TerminalDecision,
    TerminalStrategy,
    arun_plan,
    base_seed,
    call_config,
    check_evidence,
    run_plan,
    turn_plan,
    turn_stops,
)
from clinenv.config_model import ConfigModel
from clinenv.llm.base import ChatModel, ChatResult, Choice, GenerationConfig
from clinenv.protocol.biases import bias_text, check_bias
from clinenv.protocol.parser import split_reasoning
from clinenv.protocol.turns import cut_turn, stop_strings
from clinenv.seeding import call_seed

PROMPTS = ("egip", "agentclinic")
OBSERVATION_FORMATS = ("view", "delta")
#: First line of the evidence interface (:func:`clinenv.protocol.evidence.render_evidence`).
EVIDENCE_START = "# Objective (S0)"


#: Appended to an action the backend cut at a turn stop (:func:`with_boundary`).
TURN_END = "<|im_end|>"


def with_boundary(choice: Choice) -> str:
    """The action text of ``choice``: its text, plus :data:`TURN_END` when the backend
    cut it at one of the doctor's turn stops
    (:func:`~clinenv.protocol.turns.stop_strings`), so that the environment sees that
    the model wrote past its turn and flags the step (``wrote_past_turn``) whichever
    side cut; nothing after the boundary is passed on."""
    if not choice.stop_enforced or choice.raw_text is None:
        return choice.text
    rest = choice.raw_text[len(choice.text):]
    if any(rest.startswith(s) for s in stop_strings("doctor")):
        return choice.text + TURN_END
    return choice.text


def biased_plan(plan: Plan[Any], text: str) -> Plan[Any]:
    """``plan`` with ``text`` appended to the system message (the first message, when
    its role is ``"system"``) of every call it asks for. Returns what ``plan`` returns."""
    try:
        request = next(plan)
        while True:
            messages = request.messages
            if messages and messages[0].get("role") == "system":
                messages = [{**messages[0], "content": messages[0]["content"] + text},
                            *messages[1:]]
            result: ChatResult = yield CallRequest(request.purpose, messages, request.config)
            request = plan.send(result)
    except StopIteration as stop:
        return stop.value


def evidence_part(text: str) -> str:
    """e_T inside a decision-phase observation: the text from ``# Objective (S0)`` on.

    A ``"view"`` observation is e_T already; a ``"delta"`` one starts with the responses
    to the last acquisition action, which are not part of e_T.
    """
    start = text.find(EVIDENCE_START)
    return text[start:] if start > 0 else text


class LLMDoctorConfig(ConfigModel):
    """The LLM doctor's settings (frozen; unknown fields refused).

    Attributes:
        prompt: ``"egip"`` or ``"agentclinic"`` (the acquisition system prompt).
        observation_format: ``"view"`` or ``"delta"``; must match the environment's.
        max_questions: the ``"agentclinic"`` prompt's question budget (>= 1; ``None``: "a
            limited number of").
        bias: ``None`` or a name of :data:`~clinenv.protocol.biases.DOCTOR_BIASES`
            (AgentClinic's doctor biases), in every call's system prompt.
    """

    prompt: Literal["egip", "agentclinic"] = "egip"
    observation_format: Literal["view", "delta"] = "view"
    max_questions: int | None = None
    bias: str | None = None

    @field_validator("max_questions", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 1):
            raise ValueError(f"max_questions must be an integer >= 1 or None, "
                             f"got {value!r}")
        return value

    @field_validator("bias", mode="before")
    @classmethod
    def _bias(cls, value: Any) -> Any:
        return check_bias("doctor", value, "bias")


class LLMDoctor:
    """A :class:`~clinenv.agents.base.DoctorPolicy` backed by a chat model (docs/api/agents.md).

    Args:
        model: the chat model.
        strategy: a :class:`~clinenv.agents.terminal_base.TerminalStrategy` or its name
            (``"direct"``, ``"vote"``, ``"full"``, ``"discussion"`` or ``"medagentsim"``).
        doctor_config: the doctor's settings (:class:`LLMDoctorConfig`); kept as
            :attr:`doctor_config`.
        config: generation settings of every call (default ``model.config``).
        name: the policy name for run logs (default ``"llm-<strategy>"``).
        **settings: :class:`LLMDoctorConfig` fields by name (``prompt="agentclinic"``,
            ``bias="recency"``...), instead of ``doctor_config``.

    Attributes:
        last_decision: the latest ``TerminalDecision``, or ``None``.

    Raises:
        pydantic.ValidationError: an invalid setting (a ``ValueError``: an unknown
            prompt, format or bias, or a bad ``max_questions``).
        ValueError: an unknown strategy name.
        TypeError: ``model`` is not a :class:`~clinenv.llm.base.ChatModel`, ``strategy``
            is neither a name nor a strategy, an unknown keyword, or settings both in
            ``doctor_config`` and as keywords.
    """

    def __init__(self, model: ChatModel, *, strategy: TerminalStrategy | str = "direct",
                 doctor_config: LLMDoctorConfig | None = None,
                 config: GenerationConfig | None = None, name: str | None = None,
                 **settings: Any) -> None:
        if not isinstance(model, ChatModel):
            raise TypeError(f"model must be a clinenv.llm.ChatModel, got {type(model).__name__}")
        unknown = sorted(set(settings) - set(LLMDoctorConfig.model_fields))
        if unknown:
            raise TypeError(f"LLMDoctor() got unexpected keyword argument(s) {unknown}; its "
                            f"settings are {', '.join(LLMDoctorConfig.model_fields)}")
        if doctor_config is not None and settings:
            raise TypeError(f"LLMDoctor: settings {sorted(settings)} given both as keywords "
                            "and in doctor_config=; use one (doctor_config.replace(...))")
        if doctor_config is None:
            doctor_config = LLMDoctorConfig(**settings)
        elif not isinstance(doctor_config, LLMDoctorConfig):
            raise TypeError(f"doctor_config must be an LLMDoctorConfig, "
                            f"got {type(doctor_config).__name__}")
        self.doctor_config = doctor_config
        if isinstance(strategy, str):
            strategy = make_strategy(strategy)
        elif not isinstance(strategy, TerminalStrategy):
            raise TypeError(f"strategy must be a TerminalStrategy or a name, "
                            f"got {type(strategy).__name__}")
        self.model = model
        self.strategy = strategy
        self.generation = config or model.config
        self.name = name or f"llm-{strategy.name}"
        self.last_decision: TerminalDecision | None = None
        self._calls: list[dict[str, Any]] = []
        self.reset()

    # --------------------------------------------------------------- settings
    @property
    def prompt(self) -> str:
        return self.doctor_config.prompt

    @property
    def observation_format(self) -> str:
        return self.doctor_config.observation_format

    @property
    def max_questions(self) -> int | None:
        return self.doctor_config.max_questions

    @property
    def bias(self) -> str | None:
        return self.doctor_config.bias

    # --------------------------------------------------------------- policy API
    @property
    def system_prompt(self) -> str:
        """The acquisition-phase system prompt of this doctor (its bias text last)."""
        if self.prompt == "agentclinic":
            budget = (AGENTCLINIC_BUDGET_UNKNOWN if self.max_questions is None
                      else AGENTCLINIC_BUDGET_KNOWN.format(n=self.max_questions))
            return AGENTCLINIC_DOCTOR_SYSTEM.format(budget=budget) + bias_text(
                "doctor", self.bias)
        return EGIP_DOCTOR_SYSTEM + bias_text("doctor", self.bias)

    @property
    def config(self) -> dict[str, Any]:
        """JSON-ready description for run logs (never an API key): ``agent``,
        ``backend``, ``model``, ``generation``, ``strategy``, ``prompt``,
        ``observation_format``, ``max_questions``; ``bias`` when one is set."""
        out = {"agent": "llm_doctor", "backend": self.model.backend,
               "model": self.model.model,
               "generation": self.generation.model_dump(mode="json"),
               "strategy": self.strategy.describe(), "prompt": self.prompt,
               "observation_format": self.observation_format,
               "max_questions": self.max_questions}
        if self.bias is not None:
            out["bias"] = self.bias
        return out

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode: ``seed`` is the episode seed of every per-call seed; the
        chat history (``"delta"``) is cleared. Undrained call records are kept."""
        self._seed = check_seed(seed)
        self._history: list[dict[str, str]] = []
        self.last_decision = None

    def act(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        """The next action (docs/api/agents.md).

        Raises:
            ValueError: ``info["phase"]`` is neither ``"acquire"`` nor ``"decide"``, the
                observation has no ``text``, or the ``"egip"`` prompt meets the native
                AgentClinic protocol (docs/api/agents.md).
            clinenv.llm.base.BackendError: a model call failed.
        """
        return run_plan(self._plan(observation, info), self.model)

    async def aact(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> str:
        """:meth:`act` with the asynchronous model API (same results and errors)."""
        return await arun_plan(self._plan(observation, info), self.model)

    def drain_calls(self) -> list[dict[str, Any]]:
        """The call records since the last drain (then cleared), oldest first.

        Each is :meth:`~clinenv.llm.base.ChatResult.to_log` with ``turn``, ``purpose``
        (``"acquire"``, ``"decide"``, ``"vote"``, ``"council"``, ``"ledger"``,
        ``"consensus"``, ``"discussion"``, ``"summary"``, ``"repair"``),
        ``agent="doctor"`` and ``flags`` (parse notes:
        ``"empty_reply"``, ``"unparsed"``, ``"invalid"``..., and ``"wrote_past_turn"``
        when the reply went past the doctor's turn).
        """
        calls, self._calls = self._calls, []
        return calls

    # ----------------------------------------------------------------- internals
    def _plan(self, observation: Mapping[str, Any], info: Mapping[str, Any]) -> Plan[str]:
        text = observation.get("text") if isinstance(observation, Mapping) else None
        if not isinstance(text, str):
            raise ValueError("observation['text'] must be a string")
        phase = info.get("phase", "acquire")
        turn = int(info.get("turn", 0))
        episode = base_seed(self._seed, self.generation)
        if phase == "decide":
            evidence = evidence_part(text)
            candidates = check_evidence(evidence, info.get("candidates"))
            plan = self.strategy.plan(evidence, candidates=candidates,
                                      seed=call_seed(episode, turn, "decide"),
                                      config=self.generation)
            if self.bias is not None:
                plan = biased_plan(plan, bias_text("doctor", self.bias))
            decision = yield from turn_plan(plan, "doctor")
            self.last_decision = decision
            for record in decision.calls:
                self._calls.append({"turn": turn, "purpose": record.get("purpose"),
                                    "agent": "doctor", **record})
            return decision.action
        if phase != "acquire":
            raise ValueError(f"info['phase'] must be 'acquire' or 'decide', got {phase!r}")
        if self.prompt == "egip" and info.get("protocol") == "agentclinic":
            raise ValueError("the 'egip' doctor prompt never states a diagnosis during "
                             "acquisition, but the native AgentClinic protocol ends only on "
                             "DIAGNOSIS READY: use prompt='agentclinic' (CLI: --prompt "
                             "agentclinic)")
        if self.observation_format == "delta":
            self._history.append({"role": "user", "content": text})
            messages = [{"role": "system", "content": self.system_prompt}, *self._history]
        else:
            messages = [{"role": "system", "content": self.system_prompt},
                        {"role": "user", "content": text}]
        result = yield CallRequest("acquire", messages, turn_stops(call_config(
            self.generation, seed=call_seed(episode, turn, "acquire"), n=1), "doctor"))
        choice = result.choices[0]
        reply = with_boundary(choice)
        own = cut_turn(split_reasoning(reply)[0], "doctor")
        flags = []
        if not own.text:
            flags.append("empty_reply")
            if choice.truncated:
                reply = ""  # no action; the env gives feedback, the round counts
        flags += own.flags
        if self.observation_format == "delta":
            self._history.append({"role": "assistant", "content": own.text})
        self._calls.append(result.to_log(turn=turn, purpose="acquire", agent="doctor",
                                         flags=flags))
        return reply
