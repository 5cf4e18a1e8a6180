"""Chat models run by an in-process vLLM engine (extra ``vllm``; needs a CUDA GPU).

:meth:`VLLMChatModel.agenerate` gathers concurrent coroutines' requests into batched
``llm.chat`` calls (:class:`~clinenv.llm.batcher.MicroBatcher`).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Sequence
from typing import Any

from clinenv.errors import install_hint
from clinenv.llm.base import (
    BackendError,
    BackendUnavailableError,
    ChatModel,
    ChatResult,
    Choice,
    GenerationConfig,
    Message,
    check_messages,
    enforce_stop,
)
from clinenv.llm.batcher import MicroBatcher
from clinenv.llm.checks import finish_reason, identical_choices_warning, too_few_choices_message

_Request = tuple[list[dict[str, str]], GenerationConfig]


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise BackendUnavailableError(
            "the in-process vLLM backend needs vLLM (CUDA GPU): " + install_hint("vllm")
        ) from exc
    return vllm


def sampling_kwargs(config: GenerationConfig, *, tokens: bool = False) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for ``config``.

    ``temperature``, ``top_p``, ``max_tokens``, ``n``, ``seed`` (``None`` kept: vLLM then
    draws its own), ``stop`` (a list; omitted when empty), ``logprobs=0`` with ``tokens``
    (the sampled token's logprob only), then ``config.extra`` merged last (e.g.
    ``{"top_k": 20}``), so it may override any of them.
    """
    kwargs: dict[str, Any] = {
        "temperature": config.temperature, "top_p": config.top_p,
        "max_tokens": config.max_tokens, "n": config.n, "seed": config.seed,
    }
    if config.stop:
        kwargs["stop"] = list(config.stop)
    if tokens:
        kwargs["logprobs"] = 0
    kwargs.update(config.extra)
    return kwargs


def make_sampling_params(config: GenerationConfig, *, tokens: bool = False) -> Any:
    """``vllm.SamplingParams`` for ``config`` when vLLM is importable, else the kwargs
    dict of :func:`sampling_kwargs` (what an injected test engine receives)."""
    kwargs = sampling_kwargs(config, tokens=tokens)
    try:
        from vllm import SamplingParams
    except ImportError:
        return kwargs
    return SamplingParams(**kwargs)


def _sampled_logprobs(out: Any, ids: Sequence[int]) -> tuple[float, ...] | None:
    """The sampled tokens' logprobs of a ``CompletionOutput``: ``out.logprobs[k]``
    (``dict[int, Logprob]``, or ``FlatLogprobs``' equivalent) at key ``ids[k]``;
    ``None`` when absent or incomplete."""
    positions = getattr(out, "logprobs", None)
    if positions is None or len(positions) != len(ids):
        return None
    values = []
    for k, token in enumerate(ids):
        entry = (positions[k] or {}).get(token)
        if entry is None:
            return None
        values.append(float(getattr(entry, "logprob", entry)))
    return tuple(values)


def to_chat_result(output: Any, config: GenerationConfig, *, model: str,
                   latency_s: float = 0.0, tokens: bool = False) -> ChatResult:
    """A ``vllm.RequestOutput``-like object as a :class:`ChatResult`.

    Reads ``output.outputs[i].text``, ``.finish_reason`` (``"stop"``/``"length"``/
    ``"abort"``/``None`` -> ``"stop"``/``"length"``/``"error"``/``"unknown"``) and
    ``.token_ids`` (completion tokens), and ``output.prompt_token_ids``. Adds the
    identical-choices warning. ``config.stop`` is enforced on
    each text (:func:`~clinenv.llm.base.enforce_stop`; the engine stops there already,
    so this only marks an output that went past one), unless ``config.extra`` sets
    ``include_stop_str_in_output``. With ``tokens``: :attr:`ChatResult.prompt_ids` from
    ``output.prompt_token_ids``, each choice's ``token_ids`` and its logprobs from
    ``.logprobs[k][token_ids[k]].logprob`` (``SamplingParams(logprobs=0)``).

    Raises:
        BackendError: fewer than ``config.n`` outputs (``detail="too_few_choices"``, or
            ``"no_choices"`` for none).
    """
    outputs = list(getattr(output, "outputs", None) or [])
    if len(outputs) < config.n:
        raise BackendError(too_few_choices_message(len(outputs), config.n), backend="vllm",
                           detail="no_choices" if not outputs else "too_few_choices")
    choices = tuple(Choice(text=o.text or "", finish_reason=finish_reason(o.finish_reason))
                    for o in outputs[:config.n])
    if config.stop and not config.extra.get("include_stop_str_in_output"):
        choices = tuple(enforce_stop(c, config.stop) for c in choices)
    prompt_ids = getattr(output, "prompt_token_ids", None)
    completion = [getattr(o, "token_ids", None) for o in outputs[:config.n]]
    if tokens:
        choices = tuple(
            dataclasses.replace(c, token_ids=None if ids is None else tuple(int(t) for t in ids),
                                logprobs=None if ids is None else _sampled_logprobs(o, ids))
            for c, o, ids in zip(choices, outputs, completion, strict=False))
    note = identical_choices_warning(choices, config)
    return ChatResult(
        prompt_ids=(tuple(int(t) for t in prompt_ids)
                    if tokens and prompt_ids is not None else None),
        choices=choices, model=model, backend="vllm",
        prompt_tokens=None if prompt_ids is None else len(prompt_ids),
        completion_tokens=(None if any(c is None for c in completion)
                           else sum(len(c) for c in completion)),
        latency_s=latency_s, n_requests=1, seed=config.seed,
        warnings=(note,) if note else ())


class VLLMChatModel(ChatModel):
    """A model run in this process by ``vllm.LLM``; engine calls run one at a time, and an
    engine exception becomes ``BackendError(detail="engine_error")`` for each request.

    Args:
        model: a local path or hub id vLLM can load.
        config: default :class:`GenerationConfig`.
        engine_kwargs: extra ``vllm.LLM`` arguments (``dtype``, ``max_model_len``...).
        llm: an engine object to use instead (anything with vLLM's ``chat(conversations,
            sampling_params, use_tqdm=False)``); vLLM is then not imported.
        max_batch: most requests per engine call from :meth:`agenerate` (>= 1).
        batch_window_s: seconds :meth:`agenerate` waits for more requests (>= 0).

    Raises:
        BackendUnavailableError: vLLM is missing and no ``llm`` is given.
        ValueError: bad ``max_batch`` or ``batch_window_s``.
    """

    backend = "vllm"

    def __init__(self, model: str, *, config: GenerationConfig | None = None,
                 engine_kwargs: dict[str, Any] | None = None, llm: Any = None,
                 max_batch: int = 256, batch_window_s: float = 0.005) -> None:
        super().__init__(model, config=config)
        if llm is None:
            vllm = _import_vllm()
            llm = vllm.LLM(model=model, **(engine_kwargs or {}))
        self._llm = llm
        self._engine_lock = threading.Lock()
        self._batcher: MicroBatcher[_Request, ChatResult] = MicroBatcher(
            self._run_requests, max_batch=max_batch, window_s=batch_window_s)

    @property
    def n_engine_calls(self) -> int:
        """Engine calls made by :meth:`agenerate` batches so far."""
        return self._batcher.n_batches

    # ------------------------------------------------------------------ engine
    def _run_requests(self, requests: list[_Request]) -> list[ChatResult]:
        """One engine call for many (messages, config) requests; results in order."""
        if self._llm is None:
            raise BackendError("the vLLM model is closed", backend="vllm", detail="closed")
        configs = [cfg for _, cfg in requests]
        params = [make_sampling_params(cfg, tokens=self.log_tokens) for cfg in configs]
        same = all(cfg == configs[0] for cfg in configs)
        start = time.perf_counter()
        try:
            with self._engine_lock:
                outputs = self._llm.chat([msgs for msgs, _ in requests],
                                         params[0] if same else params, use_tqdm=False)
        except Exception as exc:  # noqa: BLE001 - engine failures become BackendError
            raise BackendError(f"vLLM engine call failed: {type(exc).__name__}: {exc}",
                               backend="vllm", detail="engine_error") from exc
        latency = time.perf_counter() - start
        outputs = list(outputs)
        if len(outputs) != len(requests):
            raise BackendError(f"engine returned {len(outputs)} outputs for "
                               f"{len(requests)} conversations", backend="vllm",
                               detail="malformed")
        return [to_chat_result(out, cfg, model=self.model, latency_s=latency,
                               tokens=self.log_tokens)
                for out, cfg in zip(outputs, configs, strict=True)]

    # ------------------------------------------------------------------ interface
    def _generate(self, messages: list[dict[str, str]], config: GenerationConfig) -> ChatResult:
        return self._run_requests([(messages, config)])[0]

    async def _agenerate(self, messages: list[dict[str, str]],
                         config: GenerationConfig) -> ChatResult:
        return await self._batcher.submit((messages, config))

    def generate_batch(self, conversations: Sequence[Sequence[Message]],
                       config: GenerationConfig | None = None,
                       **overrides: Any) -> list[ChatResult]:
        """All conversations in one engine call (same config); results in input order.

        Raises:
            ValueError: a malformed conversation (its messages' index is named).
            BackendError: the engine failed or returned too few outputs.
        """
        cfg = (config or self.config).merged(**overrides)
        requests = [(check_messages(m), cfg) for m in conversations]
        results = self._run_requests(requests) if requests else []
        return [self._keep_messages(r, m) for r, (m, _) in zip(results, requests, strict=True)]

    def close(self) -> None:
        """Drop the engine (its GPU memory is freed once nothing else references it).
        Later calls raise ``BackendError(detail="closed")``."""
        self._llm = None
