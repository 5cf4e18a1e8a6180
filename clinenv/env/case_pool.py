"""A loaded, immutable set of cases shared by every environment that uses it.

Pools are cached per process, keyed by the resolved file's path, size and modification
time and the disclosure setting; with the per-case protocol artifacts they are clinenv's
only process-wide state, and they hold frozen data only.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from clinenv.cases import Case
from clinenv.errors import ChecksumWarning
from clinenv.protocol.prepared import PreparedCase


class CasePool:
    """An immutable, indexed sequence of cases.

    Args:
        cases: the cases; at least one, ``case_id`` values unique.
        name: a label for messages (dataset name or file).
        sha256: records digest of the source file (sha256 of its canonical form,
            :mod:`clinenv.datasets.digests`; the run log's ``dataset_sha256``), when the
            pool came from one.
        sha256_aliases: raw sha256 digests that name the same records (the file's bytes;
            the pinned file's when the records equal it); logs written by clinenv
            versions that recorded the file's byte digest resume with them.
        mismatch: the :class:`~clinenv.errors.ChecksumError` of a file whose records
            differ from the pinned ones, or ``None``.

    Raises:
        ValueError: no cases, or duplicate case ids.
    """

    _cache: dict[tuple, CasePool] = {}
    _lock = threading.Lock()

    def __init__(self, cases: Sequence[Case], name: str, sha256: str | None = None, *,
                 sha256_aliases: Sequence[str] = (), mismatch: Exception | None = None) -> None:
        if not cases:
            raise ValueError(f"{name}: no cases")
        self.cases: tuple[Case, ...] = tuple(cases)
        self.name = name
        self.sha256 = sha256
        self.sha256_aliases: tuple[str, ...] = tuple(sha256_aliases)
        self.mismatch = mismatch
        self._index = {c.case_id: i for i, c in enumerate(self.cases)}
        if len(self._index) != len(self.cases):
            raise ValueError(f"{name}: duplicate case ids")
        self._prepared: dict[tuple[str, float, float], PreparedCase] = {}
        self._prepared_lock = threading.Lock()
        self._derived: dict[str, CasePool] = {}

    def prepared(self, case: Case, *, accept: float, suggest: float) -> PreparedCase:
        """The shared protocol artifacts of ``case`` (built on first use; thread-safe)."""
        key = (case.case_id, accept, suggest)
        prepared = self._prepared.get(key)
        if prepared is None:
            built = PreparedCase.build(case, accept=accept, suggest=suggest)
            with self._prepared_lock:
                prepared = self._prepared.setdefault(key, built)
        return prepared

    def __getstate__(self) -> dict:
        """Pickled without the prepared-case cache and its lock (rebuilt on use)."""
        state = self.__dict__.copy()
        del state["_prepared_lock"]
        state["_prepared"] = {}
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._prepared_lock = threading.Lock()

    def derived(self, key: str, build: Callable[[tuple[Case, ...]], Sequence[Case]]
                ) -> CasePool:
        """The pool of the cases ``build(self.cases)`` returns, made once per ``key`` and
        shared like this one (a setting that changes which cases are played or how they
        read, e.g. ``target_in_menu``); it is named ``"<name> (<key>)"`` and keeps this
        pool's digests.

        Raises:
            ValueError: ``build`` returns no case.
        """
        with self._prepared_lock:
            pool = self._derived.get(key)
        if pool is None:
            built = CasePool(build(self.cases), f"{self.name} ({key})", self.sha256,
                             sha256_aliases=self.sha256_aliases, mismatch=self.mismatch)
            with self._prepared_lock:
                pool = self._derived.setdefault(key, built)
        return pool

    def with_target_in_menu(self, setting: str) -> CasePool:
        """This pool under ``ProtocolConfig.target_in_menu``: itself for ``"keep"``, else
        the shared :meth:`derived` pool of
        :func:`clinenv.protocol.menu.menu_setting_cases` (``"exclude"``, ``"neutral"``).

        Raises:
            ValueError: an unknown setting, or ``"exclude"`` leaving no case.
        """
        if setting == "keep":
            return self
        from clinenv.protocol.menu import menu_setting_cases

        return self.derived(f"target_in_menu={setting}", lambda cases: menu_setting_cases(
            cases, setting, name=self.name))

    def __len__(self) -> int:
        return len(self.cases)

    def case(self, key: str | int) -> Case:
        """The case with this ``case_id`` or 0-based index.

        Raises:
            KeyError: unknown ``case_id`` (the message lists a few valid ids).
            IndexError: index out of range.
        """
        if isinstance(key, bool) or not isinstance(key, int | str):
            raise KeyError(f"{self.name}: case key must be a case_id string or an int "
                           f"index, got {key!r}")
        if isinstance(key, int) or key.isdigit():
            index = int(key)
            if not 0 <= index < len(self.cases):
                raise IndexError(f"{self.name}: case index {index} out of range "
                                 f"0..{len(self.cases) - 1}")
            return self.cases[index]
        try:
            return self.cases[self._index[key]]
        except KeyError:
            sample = ", ".join(c.case_id for c in self.cases[:3])
            raise KeyError(f"{self.name}: no case {key!r} (ids look like {sample}, ...)") from None

    @classmethod
    def get(
        cls,
        dataset: str,
        *,
        cases: Sequence[Case] | None = None,
        data_dir: str | None = None,
        disclosure: str = "presentation",
        allow_download: bool = False,
        verify: bool = True,
    ) -> CasePool:
        """The pool for ``dataset`` (loaded on first use, then shared).

        Args:
            verify: refuse a registry dataset whose records differ from the pinned ones;
                ``False`` uses it with a :class:`~clinenv.errors.ChecksumWarning`
                (:func:`clinenv.datasets.load_cases`).

        Raises:
            clinenv.errors.DatasetNotFoundError: the dataset file cannot be found.
            clinenv.errors.ChecksumError: the records differ from the pinned ones and
                ``verify`` is true.
            clinenv.errors.CaseFormatError: the file is malformed.
        """
        if cases is not None:
            return cls(cases, "<cases>")
        from clinenv.datasets import resolve_dataset
        from clinenv.datasets.registry import get_spec
        from clinenv.datasets.resolve import dataset_identity, is_path_like

        path = Path(resolve_dataset(dataset, data_dir, allow_download=allow_download,
                                    verify=False))
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, disclosure)
        with cls._lock:
            pool = cls._cache.get(key)
        if pool is None:
            from clinenv.datasets import load_cases

            spec = None if is_path_like(dataset) else get_spec(dataset)
            identity = dataset_identity(path, spec)  # records checked once, then cached
            if identity.mismatch is not None and verify:
                raise identity.mismatch
            with warnings.catch_warnings():  # warned below, on every get
                warnings.simplefilter("ignore", ChecksumWarning)
                loaded = load_cases(dataset if not Path(dataset).exists() else path,
                                    data_dir, disclosure=disclosure,
                                    allow_download=allow_download, verify=False)
            pool = cls(loaded, dataset, identity.records_sha256,
                       sha256_aliases=identity.aliases, mismatch=identity.mismatch)
            with cls._lock:
                pool = cls._cache.setdefault(key, pool)
        if pool.mismatch is not None:
            if verify:
                raise pool.mismatch
            summary = getattr(pool.mismatch, "summary", str(pool.mismatch))
            warnings.warn(f"{summary}; used anyway (verify=False)", ChecksumWarning,
                          stacklevel=3)
        return pool
