"""Build a chat model from a backend name (what the command line and configs give).

Backends are imported only when chosen, so an unused extra need not be installed.
"""

from __future__ import annotations

from typing import Any

from clinenv.llm.base import ChatModel

#: Accepted backend names; ``"hf"`` is an alias of ``"transformers"``.
BACKENDS = ("openai", "vllm", "transformers", "hf", "scripted")


def make_chat_model(backend: str, model: str, **kwargs: Any) -> ChatModel:
    """A chat model of the named backend (case and surrounding spaces ignored).

    Args:
        backend: ``"openai"`` (:class:`~clinenv.llm.openai_backend.OpenAIChatModel`),
            ``"vllm"`` (:class:`~clinenv.llm.vllm_backend.VLLMChatModel`),
            ``"transformers"`` or ``"hf"`` (:class:`~clinenv.llm.hf_backend.
            TransformersChatModel`), or ``"scripted"`` (:class:`~clinenv.llm.scripted.
            ScriptedChatModel`; without ``replies``, ``responder`` names a script of
            :data:`~clinenv.llm.scripted.SCRIPTS`, default ``"clinician"``).
        model: the model name, path or hub id (for ``"scripted"``, only reported).
        **kwargs: the backend's constructor arguments.

    Raises:
        ValueError: an unknown backend (the known ones listed) or ``responder``.
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

