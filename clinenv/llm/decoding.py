"""Generated token ids to reply text with the reasoning tags kept (``<think>`` blocks).

Some tokenizers mark ``<think>``/``</think>`` as special tokens, so decoding with
``skip_special_tokens=True`` would drop the tags and leave the reasoning in the action;
the action parser (:func:`clinenv.protocol.parser.split_reasoning`) needs the tags.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["REASONING_TAGS", "decode_reply"]

#: The tags :func:`clinenv.protocol.parser.split_reasoning` reads.
REASONING_TAGS = ("<think>", "</think>")


def _tag_ids(tokenizer: Any) -> dict[int, str]:
    out = {}
    for tag in REASONING_TAGS:
        token_id = tokenizer.convert_tokens_to_ids(tag)
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id:
            out[token_id] = tag
    return out


def _special_ids(tokenizer: Any) -> set[int]:
    special = set(tokenizer.all_special_ids)
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    special.update(i for i, token in added.items() if getattr(token, "special", False))
    return special


def decode_reply(tokenizer: Any, ids: Sequence[int]) -> str:
    """``ids`` decoded as ``tokenizer.decode(ids, skip_special_tokens=True)`` does, except
    that a token of :data:`REASONING_TAGS` is kept even when the tokenizer marks it special
    (the other special tokens are dropped, then the rest is decoded in one piece, so the
    tokenizer's own spacing rules apply).

    Args:
        tokenizer: a Hugging Face tokenizer (``decode``, ``convert_tokens_to_ids``,
            ``unk_token_id``, ``all_special_ids``).
        ids: generated token ids (end-of-turn tokens may be included: they are dropped
            as special tokens).
    """
    ids = list(ids)
    tags = _tag_ids(tokenizer)
    if not any(token in tags for token in ids):
        return tokenizer.decode(ids, skip_special_tokens=True)
    drop = _special_ids(tokenizer) - set(tags)
    return tokenizer.decode([t for t in ids if t not in drop], skip_special_tokens=False)
