"""The LLM layer: one chat-model interface and its backends.

:mod:`clinenv.llm.base` holds the interface and :func:`make_chat_model` builds a backend
by name; each backend imports its optional packages only when built.
"""

from clinenv.lazy import lazy_exports
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
from clinenv.llm.scripted import ScriptedChatModel, register_script

#: The backends, imported on first use (their modules import nothing optional, but
#: they are large).
_BACKENDS = {
    "OpenAIChatModel": "clinenv.llm.openai_backend",
    "VLLMChatModel": "clinenv.llm.vllm_backend",
    "TransformersChatModel": "clinenv.llm.hf_backend",
}
__getattr__, __dir__, _lazy = lazy_exports(__name__, _BACKENDS)

__all__ = [
    "BackendError", "BackendUnavailableError", "ChatModel", "ChatResult", "Choice",
    "GenerationConfig", "LLMError", "Message", "ScriptedChatModel",
    "make_chat_model", "register_script", *_lazy,
]

