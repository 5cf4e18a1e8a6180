"""An opt-in reply cache for the LLM patient: repeated rows replay the same patient.

:class:`CachedPatient` answers a question seen before (same messages, seed, settings,
model) from a shared :class:`PatientReplyCache` (docs/api/agents.md).
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from clinenv.agents.llm_patient import LLMPatient
from clinenv.protocol.views import PatientView

__all__ = ["CachedPatient", "PatientReplyCache"]


class PatientReplyCache:
    """Patient replies by key, thread-safe, optionally on disk.

    Args:
        path: a ``.jsonl`` file (one ``{"key", "reply", "flags"}`` per line) to load when
            it exists and append new replies to; ``None`` keeps the cache in memory.

    Attributes:
        hits: lookups answered from the cache (int).
        misses: lookups that were not (int).

    Raises:
        ValueError: a malformed line of ``path`` (file, line and field named), or a key
            stored twice with different values.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self._lock = threading.Lock()
        self._store: dict[str, tuple[str, tuple[str, ...]]] = {}
        self.hits = 0
        self.misses = 0
        self.path = Path(path) if path is not None else None
        if self.path is not None and self.path.exists():
            self._load(self.path)

    def _load(self, path: Path) -> None:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path}:{n}: not JSON ({err.msg})") from None
                if not isinstance(item, dict):
                    raise ValueError(f"{path}:{n}: expected a JSON object")
                for field, kind in (("key", str), ("reply", str), ("flags", list)):
                    if not isinstance(item.get(field), kind):
                        raise ValueError(f"{path}:{n}: field {field!r} must be a "
                                         f"{kind.__name__}, got {item.get(field)!r}")
                if not all(isinstance(f, str) for f in item["flags"]):
                    raise ValueError(f"{path}:{n}: field 'flags' must list strings")
                value = (item["reply"], tuple(item["flags"]))
                if self._store.setdefault(item["key"], value) != value:
                    raise ValueError(f"{path}:{n}: field 'key' {item['key']!r} is stored "
                                     "twice with different replies")

    def __len__(self) -> int:
        with self._lock:
            return len(self._store)

    def get(self, key: str) -> tuple[str, list[str]] | None:
        """``(reply, flags)`` stored under ``key`` (counted as a hit), else ``None``
        (counted as a miss)."""
        with self._lock:
            value = self._store.get(key)
            if value is None:
                self.misses += 1
                return None
            self.hits += 1
        return value[0], list(value[1])

    def put(self, key: str, reply: str, flags: list[str]) -> tuple[str, list[str]]:
        """Store ``(reply, flags)`` under ``key`` unless a value is there already;
        returns the stored value (the first one put wins)."""
        value = (str(reply), tuple(str(f) for f in flags))
        with self._lock:
            stored = self._store.setdefault(key, value)
            if stored is value and self.path is not None:
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"key": key, "reply": value[0],
                                         "flags": list(value[1])}) + "\n")
        return stored[0], list(stored[1])


class CachedPatient:
    """An :class:`~clinenv.agents.llm_patient.LLMPatient` whose replies are cached
    (docs/api/agents.md); a patient seat of :class:`clinenv.env.EGIPEnv` (``patient=``).

    Args:
        patient: the LLM patient to wrap (its model is called on a miss).
        cache: the cache to use (share one between environments); default a new one.

    Attributes:
        last_flags: the flags of the latest reply (stored ones on a hit).

    Raises:
        TypeError: ``patient`` is not an LLMPatient or ``cache`` not a PatientReplyCache.
    """

    name = "cached_llm_patient"

    def __init__(self, patient: LLMPatient, cache: PatientReplyCache | None = None) -> None:
        if not isinstance(patient, LLMPatient):
            raise TypeError(f"patient must be an LLMPatient, got {type(patient).__name__}")
        if cache is not None and not isinstance(cache, PatientReplyCache):
            raise TypeError(f"cache must be a PatientReplyCache, got {type(cache).__name__}")
        self.patient = patient
        self.cache = cache if cache is not None else PatientReplyCache()
        self.last_flags: list[str] = []

    @property
    def bias(self) -> str | None:
        """The wrapped patient's bias (``EnvConfig.patient_bias`` must match it)."""
        return self.patient.bias

    @property
    def config(self) -> dict[str, Any]:
        """The wrapped patient's run-log description, with ``"cached": True``."""
        return {**self.patient.config, "cached": True}

    def reset(self, *, seed: int | None = None) -> None:
        """Start an episode (:meth:`LLMPatient.reset`).

        Raises:
            ValueError: a negative or non-integer seed.
        """
        self.patient.reset(seed=seed)
        self.last_flags = []

    def drain_calls(self) -> list[dict[str, Any]]:
        """The wrapped patient's call records (misses only; docs/api/agents.md)."""
        return self.patient.drain_calls()

    def key_for(self, view: PatientView) -> str:
        """The cache key of ``view`` (64 hex digits; docs/api/agents.md).

        Raises:
            TypeError: ``view`` is not a PatientView.
        """
        seat = self.patient
        config = seat.call_config(len(view.dialogue), "patient")
        blob = json.dumps({"messages": seat.messages_for(view),
                           "config": config.model_dump(mode="json"),
                           "backend": seat.model.backend, "model": seat.model.model},
                          sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _lookup(self, view: PatientView) -> tuple[str, tuple[str, list[str]] | None]:
        self.last_flags = []
        key = self.key_for(view)
        return key, self.cache.get(key)

    def _store(self, key: str, reply: str) -> str:
        calls = self.patient._calls  # the record the wrapped patient just added
        if calls and calls[-1].get("question_index") is not None:
            calls[-1]["cache_key"] = key
        reply, flags = self.cache.put(key, reply, self.patient.last_flags)
        self.last_flags = flags
        return reply

    def reply(self, view: PatientView) -> str:
        """The patient's reply: the cached one, else the wrapped patient's (stored).

        Raises:
            TypeError: ``view`` is not a PatientView.
            clinenv.llm.base.BackendError: a miss whose model call failed (nothing
                stored).
        """
        key, hit = self._lookup(view)
        if hit is not None:
            self.last_flags = hit[1]
            return hit[0]
        return self._store(key, self.patient.reply(view))

    async def areply(self, view: PatientView) -> str:
        """:meth:`reply` with the wrapped patient's asynchronous ``areply`` on a miss."""
        key, hit = self._lookup(view)
        if hit is not None:
            self.last_flags = hit[1]
            return hit[0]
        return self._store(key, await self.patient.areply(view))
