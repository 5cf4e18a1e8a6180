"""Build a chat model from a backend name (what the command line and configs give).

Backends are imported only when chosen, so an unused extra need not be installed.
"""

from __future__ import annotations

from typing import Any

from clinenv.llm.base import ChatModel

#: Accepted backend names; ``"hf"`` is an alias of ``"transformers"``.
BACKENDS = ("openai", "vllm", "transformers", "hf", "scripted")


def make_chat_model(backend: str, model: str, **kwargs: Any) -> ChatModel:
    """A chat model of the named backend.

    Args:
        backend: ``"openai"`` (:class:`~clinenv.llm.openai_backend.OpenAIChatModel`:
            ``base_url``, ``api_key``, ``timeout_s``, ``max_retries``,
            ``reasoning_fallback``, ``http_transport``, ``preload``), ``"vllm"``
            (:class:`~clinenv.llm.vllm_backend.VLLMChatModel`: ``engine_kwargs``...),
            ``"transformers"`` or ``"hf"``
            (:class:`~clinenv.llm.hf_backend.TransformersChatModel`: ``device``,
            ``dtype``...), or ``"scripted"``
            (:class:`~clinenv.llm.scripted.ScriptedChatModel`: ``replies``, a list or a
            function; without it, ``responder`` names a registered script,
            :data:`~clinenv.llm.scripted.SCRIPTS`, default ``"clinician"``, which
            :mod:`clinenv.testing.fake_responders` registers, so an offline run needs no
            server). Case and surrounding spaces are ignored.
        model: the model name, path or hub id (for ``"scripted"``, only reported).
        **kwargs: the backend's constructor arguments (``config=`` for all of them).

    Raises:
        ValueError: an unknown backend name (the message lists the known ones), or an
            unknown ``responder`` name.
        BackendUnavailableError: the backend's extra is not installed.
        TypeError: an argument the backend does not take.
    """
    name = str(backend).strip().lower()
    if name == "openai":
        from clinenv.llm.openai_backend import OpenAIChatModel

        return OpenAIChatModel(model, **kwargs)
    if name == "vllm":
        from clinenv.llm.vllm_backend import VLLMChatModel

        return VLLMChatModel(model, **kwargs)
    if name in ("transformers", "hf"):
        from clinenv.llm.hf_backend import TransformersChatModel

        return TransformersChatModel(model, **kwargs)
    if name == "scripted":
        from clinenv.llm.scripted import ScriptedChatModel, named_script

        replies = kwargs.pop("replies", None)
        responder = kwargs.pop("responder", "clinician")
        if replies is None:
            replies = named_script(responder)
        return ScriptedChatModel(replies, model=model, **kwargs)
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")

