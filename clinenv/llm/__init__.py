"""The LLM layer: one chat-model interface and its backends.

See :mod:`clinenv.llm.base` for the interface and :func:`make_chat_model` to build a
backend by name. Backends import their optional dependencies only when constructed, so
``import clinenv.llm`` works on a core install (it imports neither openai, torch,
transformers nor vllm). A local OpenAI-compatible server for
tests and offline demos is :class:`clinenv.testing.fake_server.FakeChatServer`.
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
    "GenerationConfig", "LLMError", "Message", "ScriptedChatModel",
    "make_chat_model",
]

