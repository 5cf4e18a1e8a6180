"""Shared pieces of the LLM-layer tests: short conversations and a tiny local chat model
(a random-weight model and a tokenizer trained here; needs ``tokenizers`` and
``transformers``, nothing downloaded).

The tests' ``fake_server`` fixture (a started
:class:`~clinenv.testing.fake_server.FakeChatServer`) is in tests/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

#: Two short conversations of different lengths (batching and padding tests).
CONVERSATIONS = [
    [{"role": "system", "content": "You are a careful doctor."},
     {"role": "user", "content": "The patient has a fever and a cough since three days."}],
    [{"role": "user", "content": "Chest pain."}],
]


def user(text: str) -> list[dict[str, str]]:
    """A one-message conversation."""
    return [{"role": "user", "content": text}]


# --------------------------------------------------------------------------- tiny model
#: A chat template in the shape most instruction models use (role tags, end marker).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} </s> {% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
_CORPUS = (
    "the patient has a fever and a cough since three days . chest pain radiates to the arm . "
    "you are a careful doctor . request test chest x-ray . diagnosis ready pneumonia . "
    "blood pressure heart rate temperature oxygen saturation normal high low mass lung "
    "biopsy shows granulomas sarcoidosis lymphoma tuberculosis asthma migraine gout "
)


def build_tiny_chat_model(folder: Path, *, arch: str = "llama", seed: int = 0) -> Path:
    """Write a random-weight 2-layer causal LM and a freshly trained tokenizer to ``folder``.

    The tokenizer is a word-level model trained with the ``tokenizers`` library on a small
    clinical word list, wrapped as a fast tokenizer with :data:`CHAT_TEMPLATE`, ``<s>`` /
    ``</s>`` / ``<pad>`` specials and left padding. The model (``"llama"`` or ``"qwen2"``)
    has hidden size 64 and 2 heads (head size 32, the minimum vLLM accepts), float32
    weights drawn after ``torch.manual_seed(seed)``. Nothing is downloaded.

    Returns:
        ``folder``, loadable with ``AutoTokenizer`` / ``AutoModelForCausalLM``.
    """
    import pytest  # skips the calling test where torch or transformers is absent

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator([_CORPUS] * 4,
                            trainers.WordLevelTrainer(special_tokens=SPECIAL_TOKENS))
    tokenizer = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
        unk_token="<unk>", padding_side="left")
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(folder)

    common = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                  num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                  max_position_embeddings=256, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                  tie_word_embeddings=False)
    if arch == "llama":
        config = transformers.LlamaConfig(**common)
    elif arch == "qwen2":
        config = transformers.Qwen2Config(**common)
    else:
        raise ValueError(f"arch must be 'llama' or 'qwen2', got {arch!r}")
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    model.save_pretrained(folder)
    return folder
