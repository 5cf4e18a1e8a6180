"""A tiny ChatML tokenizer and a random-weight Qwen3 for trainer tests on a CPU, without
downloading a model (needs ``tokenizers`` and ``transformers``; ``torch`` for the model).

The tokenizer is a byte-level BPE trained on the caller's corpus, with the ChatML and tool
tokens as specials and TRL's Qwen3 chat template (TRL parses tool calls only for the
templates it lists); the model is two layers of width 32.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Special tokens of the ChatML/Qwen3 tool-calling format.
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>", "<think>", "</think>")


#: Plain ChatML: ``<|im_start|>ROLE\nCONTENT<|im_end|>\n`` per message, then
#: ``<|im_start|>assistant\n`` with ``add_generation_prompt`` (needs no TRL).
CHATML_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}"
                   "<|im_end|>\n{% endfor %}"
                   "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def chatml_tokenizer(corpus: Iterable[str], vocab_size: int = 1000, *,
                     template: str | None = None) -> Any:
    """A ``PreTrainedTokenizerFast`` (byte-level BPE of ``vocab_size`` tokens trained on
    ``corpus``; eos ``<|im_end|>``, pad ``<|endoftext|>``) with ``template`` as its chat
    template (Jinja text, e.g. :data:`CHATML_TEMPLATE`), or by default TRL's Qwen3 one
    (then TRL is imported)."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(list(corpus), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                               pad_token="<|endoftext|>")
    if template is None:
        from trl.chat_template_utils import qwen3_chat_template

        template = qwen3_chat_template
    tok.chat_template = template
    return tok


def tiny_qwen3(tok: Any, seed: int = 0) -> Any:
    """A two-layer Qwen3 with random weights (seeded) over ``tok``'s vocabulary."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.Qwen3Config(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16,
        max_position_embeddings=8192, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, bos_token_id=None)
    return transformers.AutoModelForCausalLM.from_config(config)
