"""Token ids in run logs (``clinenv run --log-tokens``): the size rule.

A record keeps only the part of its prompt ids that is new since the same agent's
previous call (:func:`compact_prompt_ids`), so a log grows linearly with an episode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["compact_prompt_ids", "expand_prompt_ids", "shared_prefix"]


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _reference(prompt: Sequence[int], record: Mapping[str, Any]) -> list[int]:
    completions = record.get("completion_ids") or [[]]
    return [*prompt, *(completions[0] or [])]


def compact_prompt_ids(calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``calls`` (one episode's records, each agent's in call order) with every
    ``prompt_ids`` replaced by ``prompt_ids_shared`` (int >= 0: the leading ids shared
    with the reference, which is the same ``agent``'s previous record's prompt followed
    by its first choice's completion ids, ``[]`` for its first call) and
    ``prompt_ids_new`` (the rest); lossless. Records without ``prompt_ids`` are returned
    unchanged (copies)."""
    previous: dict[Any, list[int]] = {}
    out = []
    for call in calls:
        record = dict(call)
        ids = record.pop("prompt_ids", None)
        if ids is None:
            out.append(record)
            continue
        agent = record.get("agent")
        reference = previous.get(agent, [])
        shared = shared_prefix(reference, ids)
        record["prompt_ids_shared"] = shared
        record["prompt_ids_new"] = list(ids[shared:])
        previous[agent] = _reference(ids, record)
        out.append(record)
    return out


def expand_prompt_ids(calls: Sequence[Mapping[str, Any]]) -> list[list[int] | None]:
    """The whole prompt ids of each record of ``calls`` (compacted by
    :func:`compact_prompt_ids`, or holding ``prompt_ids``), ``None`` for a record with
    neither.

    Raises:
        ValueError: a malformed ``prompt_ids_shared`` / ``prompt_ids_new`` (not an int
            in ``[0, len(reference)]``, not a list of ints); the record's index is named.
    """
    previous: dict[Any, list[int]] = {}
    out: list[list[int] | None] = []
    for i, call in enumerate(calls):
        agent = call.get("agent")
        if "prompt_ids" in call:
            ids = list(call["prompt_ids"])
        elif "prompt_ids_new" in call:
            reference = previous.get(agent, [])
            shared, new = call.get("prompt_ids_shared"), call["prompt_ids_new"]
            if (type(shared) is not int or not 0 <= shared <= len(reference)
                    or not isinstance(new, list)
                    or not all(type(t) is int for t in new)):
                raise ValueError(f"calls[{i}]: prompt_ids_shared {shared!r} / "
                                 "prompt_ids_new malformed (shared must be an int in "
                                 f"[0, {len(reference)}], new a list of ints)")
            ids = reference[:shared] + new
        else:
            out.append(None)
            continue
        previous[agent] = _reference(ids, call)
        out.append(ids)
    return out
