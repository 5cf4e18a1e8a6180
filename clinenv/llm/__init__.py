"""The LLM layer: one chat-model interface and its backends.

See :mod:`clinenv.llm.base` for the interface and :func:`make_chat_model` to build a
backend by name. Backends import their optional dependencies only when constructed, so
``import clinenv.llm`` works on a core install (it imports neither openai, torch,
transformers nor vllm). :class:`FakeChatServer` is a local OpenAI-compatible server for
tests, benchmarks and offline demos.
"""

from clinenv.llm.base import (
    BackendError,
    BackendUnavailableError,
    ChatModel,
    ChatResult,
    Choice,
    GenerationConfig,
    LLMError,
    Message,
)
from clinenv.llm.factory import make_chat_model
from clinenv.llm.scripted import ScriptedChatModel

__all__ = [
    "BackendError", "BackendUnavailableError", "ChatModel", "ChatResult", "Choice",
    "FakeChatServer", "GenerationConfig", "LLMError", "Message", "ScriptedChatModel",
    "make_chat_model",
]


def __getattr__(name: str):
    # FakeChatServer is imported on first use, so that ``python -m
    # clinenv.llm.fake_server`` does not find its module already imported by the package.
    if name == "FakeChatServer":
        from clinenv.llm.fake_server import FakeChatServer

        return FakeChatServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
