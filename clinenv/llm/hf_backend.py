"""Chat models run locally with transformers (extra ``hf``: torch and transformers).

:class:`TransformersChatModel` renders each conversation with the tokenizer's chat
template and generates with ``model.generate``; its decoding rules: docs/llm-doctors.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Sequence
from contextlib import nullcontext
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
    cut_at_stop,
    enforce_stop,
)
from clinenv.llm.checks import identical_choices_warning
from clinenv.llm.decoding import decode_reply

__all__ = ["TransformersChatModel", "cut_at_stop"]


def _import_hf() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise BackendUnavailableError(
            "the transformers backend needs torch and transformers: "
            + install_hint("hf")) from exc
    return torch, transformers


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


class TransformersChatModel(ChatModel):
    """A local causal LM driven through its chat template (padding on the left).

    Args:
        model: a local folder or hub id; with ``model_obj``, only the name reported.
        config: default :class:`GenerationConfig`.
        device: where a loaded model goes (``"cpu"``, ``"cuda:1"``...); a given
            ``model_obj`` stays where it is.
        dtype: ``None`` (the library default), ``"auto"``, a name such as ``"bfloat16"``,
            or a ``torch.dtype``.
        tokenizer: a tokenizer object to use instead of loading one.
        model_obj: a model object to use instead of loading one.
        trust_remote_code: passed to ``from_pretrained``.

    Raises:
        BackendUnavailableError: torch or transformers is missing.
        ValueError: the tokenizer has no chat template, or no end-of-sequence token.
    """

    backend = "transformers"

    def __init__(self, model: str, *, config: GenerationConfig | None = None,
                 device: str = "cpu", dtype: Any = None, tokenizer: Any = None,
                 model_obj: Any = None, trust_remote_code: bool = False) -> None:
        super().__init__(model, config=config)
        torch, transformers = _import_hf()
        self._torch = torch
        if tokenizer is None:
            tokenizer = transformers.AutoTokenizer.from_pretrained(
                model, trust_remote_code=trust_remote_code)
        if model_obj is None:
            kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
            if dtype is not None:
                if isinstance(dtype, str) and dtype != "auto":
                    dtype = getattr(torch, dtype)
                key = "dtype" if _version(transformers.__version__) >= (4, 56) else "torch_dtype"
                kwargs[key] = dtype
            model_obj = transformers.AutoModelForCausalLM.from_pretrained(model, **kwargs)
            model_obj.to(device)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"tokenizer of {model!r} has no chat_template; set "
                             "tokenizer.chat_template or pass a tokenizer that has one")
        tokenizer.padding_side = "left"
        if tokenizer.pad_token is None:
            if tokenizer.eos_token is None:
                raise ValueError(f"tokenizer of {model!r} has neither a pad nor an eos token")
            tokenizer.pad_token = tokenizer.eos_token
        model_obj.eval()
        self.tokenizer = tokenizer
        self.model_obj = model_obj
        self._eos_ids = self._end_token_ids()
        if not self._eos_ids:
            raise ValueError(f"no end-of-sequence token id for {model!r} (tokenizer and "
                             "generation_config have none)")
        self._lock = threading.Lock()

    def _end_token_ids(self) -> frozenset[int]:
        ids: set[int] = set()
        gen = getattr(self.model_obj, "generation_config", None)
        for value in (getattr(gen, "eos_token_id", None), self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, (list, tuple)):
                ids.update(int(v) for v in value)
        return frozenset(ids)

    # ------------------------------------------------------------------ generation
    def _generate_kwargs(self, config: GenerationConfig, n: int) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "max_new_tokens": config.max_tokens,
            "pad_token_id": self.tokenizer.pad_token_id,
            "eos_token_id": sorted(self._eos_ids),
        }
        if config.temperature > 0:
            kwargs.update(do_sample=True, temperature=config.temperature, top_p=config.top_p,
                          top_k=0, num_return_sequences=n)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        kwargs.update(config.extra)
        return kwargs

    def _rng_context(self, seed: int | None) -> Any:
        if seed is None:
            return nullcontext()
        torch = self._torch
        device = getattr(self.model_obj, "device", None)
        if device is not None and device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            return torch.random.fork_rng(devices=[index], device_type="cuda")
        return torch.random.fork_rng(devices=[])

    def _run(self, conversations: list[list[dict[str, str]]],
             config: GenerationConfig) -> list[ChatResult]:
        torch = self._torch
        if self.model_obj is None:
            raise BackendError("the transformers model is closed", backend=self.backend,
                               detail="closed")
        texts = [self.tokenizer.apply_chat_template(c, add_generation_prompt=True,
                                                    tokenize=False) for c in conversations]
        start = time.perf_counter()
        with self._lock:
            batch = self.tokenizer(texts, return_tensors="pt", padding=True,
                                   add_special_tokens=False)
            batch = {k: v.to(self.model_obj.device) for k, v in batch.items()}
            sampled = config.temperature > 0
            with self._rng_context(config.seed), torch.no_grad():
                if config.seed is not None:
                    torch.manual_seed(config.seed)
                kwargs = self._generate_kwargs(config, config.n)
                if self.log_tokens:
                    kwargs.update(return_dict_in_generate=True, output_logits=True)
                out = self.model_obj.generate(**batch, **kwargs)
        latency = time.perf_counter() - start
        sequences, logprobs = out, None
        if self.log_tokens:
            sequences = out.sequences
            # (rows, new tokens): log-probability of each generated token
            steps = torch.stack(out.logits, dim=1).float().log_softmax(dim=-1)
            new = sequences[:, batch["input_ids"].shape[1]:]
            logprobs = steps.gather(-1, new[:, :steps.shape[1], None]).squeeze(-1)
        input_len = batch["input_ids"].shape[1]
        prompt_lengths = batch["attention_mask"].sum(dim=1).tolist()
        per_conv = config.n if sampled else 1
        results = []
        for i, prompt_tokens in enumerate(prompt_lengths):
            choices, completion_tokens = [], 0
            for j in range(config.n):
                k = i * per_conv + (j if sampled else 0)
                row = sequences[k, input_len:].tolist()
                choice, used = self._decode(row, config)
                if logprobs is not None:
                    choice = dataclasses.replace(
                        choice, token_ids=tuple(row[:used]),
                        logprobs=tuple(float(x) for x in logprobs[k, :used].tolist()))
                choices.append(choice)
                completion_tokens += used
            note = identical_choices_warning(choices, config)
            prompt_ids = None
            if self.log_tokens:
                mask = batch["attention_mask"][i].bool()
                prompt_ids = tuple(batch["input_ids"][i][mask].tolist())
            results.append(ChatResult(
                choices=tuple(choices), model=self.model, backend=self.backend,
                prompt_tokens=int(prompt_tokens), completion_tokens=completion_tokens,
                latency_s=latency, n_requests=1, seed=config.seed,
                warnings=(note,) if note else (), prompt_ids=prompt_ids))
        return results

    def _decode(self, tokens: list[int], config: GenerationConfig) -> tuple[Choice, int]:
        """One generated row -> (choice, completion tokens)."""
        end = next((k for k, t in enumerate(tokens) if t in self._eos_ids), None)
        body = tokens if end is None else tokens[:end]
        used = len(tokens) if end is None else end + 1
        text = decode_reply(self.tokenizer, body)
        reason = "length" if end is None and used >= config.max_tokens else "stop"
        return enforce_stop(Choice(text=text, finish_reason=reason), config.stop), used

    # ------------------------------------------------------------------ interface
    def _generate(self, messages: list[dict[str, str]], config: GenerationConfig) -> ChatResult:
        return self._run([messages], config)[0]

    async def _agenerate(self, messages: list[dict[str, str]],
                         config: GenerationConfig) -> ChatResult:
        return await asyncio.to_thread(self._generate, messages, config)

    def generate_batch(self, conversations: Sequence[Sequence[Message]],
                       config: GenerationConfig | None = None,
                       **overrides: Any) -> list[ChatResult]:
        """All conversations in one left-padded ``generate`` call; results in order.

        Raises:
            ValueError: a malformed conversation.
        """
        cfg = (config or self.config).merged(**overrides)
        checked = [check_messages(m) for m in conversations]
        results = self._run(checked, cfg) if checked else []
        return [self._keep_messages(r, m) for r, m in zip(results, checked, strict=True)]

    def close(self) -> None:
        """Drop the model and tokenizer references (memory is freed once unused); later
        calls raise ``BackendError(detail="closed")``."""
        self.model_obj = None
        self.tokenizer = None
