"""Run-log episodes as token-level training rows (``clinenv export --format tokens``).

Needs a log written with ``clinenv run --log-tokens``; refused episodes are counted in
:class:`TokenSummary`. The columns are in docs/export.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinenv.export import ExportError, _reward_components, exported_lines, group_id
from clinenv.llm.tokens import expand_prompt_ids

__all__ = ["TokenSummary", "call_token_rows", "token_rows"]


class NotPrefixError(ValueError):
    """A doctor call's prompt does not start with the previous prompt and reply."""


@dataclass
class TokenSummary:
    """Counts of a token export. ``rows``: rows written; ``episodes``: episodes
    exported; ``not_prefix``: episodes refused as not a prefix chain (per-episode
    rows only); ``no_tokens``: episodes refused for missing token ids."""

    rows: int = 0
    episodes: int = 0
    not_prefix: int = 0
    no_tokens: int = 0


def _calls(calls: Sequence[Mapping[str, Any]]) -> list[tuple[list[int], list[int],
                                                             list[float] | None]]:
    """(prompt ids, completion ids, logprobs or None) of each doctor call.

    Raises:
        LookupError: a doctor call without prompt or completion ids.
        ValueError: malformed compacted prompt ids.
    """
    doctor = [c for c in calls if c.get("agent") == "doctor"]
    prompts = expand_prompt_ids(doctor)
    out = []
    for i, (call, prompt) in enumerate(zip(doctor, prompts, strict=True)):
        completions = call.get("completion_ids")
        if prompt is None or not completions or completions[0] is None:
            raise LookupError(f"doctor call {i} has no token ids")
        logprobs = (call.get("logprobs") or [None])[0]
        if logprobs is not None and len(logprobs) != len(completions[0]):
            raise ValueError(f"doctor call {i}: {len(logprobs)} logprobs for "
                             f"{len(completions[0])} completion ids")
        out.append((prompt, list(completions[0]), logprobs))
    if not out:
        raise LookupError("no doctor call")
    return out


def call_token_rows(calls: Sequence[Mapping[str, Any]], *,
                    per_turn: bool = False) -> list[dict[str, Any]]:
    """The ``input_ids``, ``assistant_mask``, ``logprobs`` (and ``turn_index`` with
    ``per_turn``) of one episode's call records (docs/export.md, "Token-level rows
    (``--format tokens``)").

    Raises:
        NotPrefixError: per episode, a prompt that does not extend the previous prompt
            and completion (the call's index is named).
        LookupError: no doctor call, or one without token ids.
        ValueError: malformed token fields.
    """
    parsed = _calls(calls)
    logged = any(lp is not None for _, _, lp in parsed)
    if per_turn:
        rows = []
        for index, (prompt, completion, logprobs) in enumerate(parsed):
            rows.append({
                "input_ids": prompt + completion,
                "assistant_mask": [0] * len(prompt) + [1] * len(completion),
                "logprobs": ([None] * len(prompt) + list(logprobs or [None] * len(completion))
                             if logged else None),
                "turn_index": index})
        return rows
    ids: list[int] = []
    mask: list[int] = []
    values: list[float | None] = []
    for index, (prompt, completion, logprobs) in enumerate(parsed):
        if prompt[:len(ids)] != ids:
            raise NotPrefixError(f"doctor call {index}: its prompt ids do not start with "
                                 "the previous call's prompt and completion ids")
        new = prompt[len(ids):]
        ids += new + completion
        mask += [0] * len(new) + [1] * len(completion)
        values += [None] * len(new) + list(logprobs or [None] * len(completion))
    return [{"input_ids": ids, "assistant_mask": mask,
             "logprobs": values if logged else None}]


def token_rows(paths: Iterable[str | Path], *, per_turn: bool = False,
               allow_credentialed: bool = False, data_dir: str | Path | None = None,
               summary: TokenSummary | None = None) -> Iterator[dict[str, Any]]:
    """Token rows of the finished episodes of run logs ``paths`` (columns and refusals:
    docs/export.md, "Token-level rows (``--format tokens``)"); refusals are counted in
    ``summary`` when given.

    Raises:
        ExportError: a log that cannot be exported (as :func:`clinenv.export.
            episode_rows`), malformed token fields (file and line named), or logs
            without any token ids (written without ``--log-tokens``).
        RunLogError: a corrupt log.
    """
    from clinenv.evaluation.components import CaseLookup

    summary = summary if summary is not None else TokenSummary()
    lookup = CaseLookup(None if data_dir is None else str(data_dir))
    seen = 0
    last: tuple[Path, int] | None = None
    for line, path, number in exported_lines(paths, allow_credentialed=allow_credentialed):
        seen += 1
        last = (path, number)
        calls = (line.get("llm") or {}).get("calls") or []
        try:
            rows = call_token_rows(calls, per_turn=per_turn)
        except NotPrefixError:
            summary.not_prefix += 1
            continue
        except LookupError:
            summary.no_tokens += 1
            continue
        except (ValueError, TypeError) as err:
            raise ExportError(f"field 'llm.calls': {err}", path=path, line=number) from None
        episode = {
            "reward": float(line["reward"]),
            "reward_components": _reward_components(line, lookup, path, number),
            "case_id": line["case_id"], "seed": line["seed"],
            "repetition": line["repetition"], "group_id": group_id(line),
            "env_id": line.get("env_id"), "model": _model(calls),
            "num_calls": sum(c.get("agent") == "doctor" for c in calls)}
        summary.episodes += 1
        for row in rows:
            summary.rows += 1
            yield row | episode
    if seen and summary.no_tokens == seen and last is not None:
        raise ExportError("no episode holds the doctor's token ids: write the run with "
                          "clinenv run --log-tokens (a vLLM server, --backend vllm or "
                          "--backend transformers)", path=last[0])


def _model(calls: Sequence[Mapping[str, Any]]) -> str | None:
    return next((c.get("model") for c in calls if c.get("agent") == "doctor"), None)
