"""clinenv: clinical diagnosis cases as Gymnasium and PettingZoo environments.

Importing the package registers the environment ids (``EGIP-MedQA-v0`` ...) with
Gymnasium. The main entry points:

- :func:`clinenv.load_cases` — cases from a named dataset or a file;
- ``gymnasium.make("EGIP-MedQA-v0")`` — the EGIP environment;
- the ``clinenv`` command line (``clinenv run``, ``clinenv data``).
"""

from __future__ import annotations

__version__ = "0.1.0"

from clinenv.cases import Case, CaseFlags, Records, Target, read_cases, write_cases
from clinenv.datasets import load_cases
from clinenv.env.registration import EGIP_IDS, register_all

register_all()

__all__ = [
    "Case",
    "CaseFlags",
    "EGIP_IDS",
    "Records",
    "Target",
    "__version__",
    "load_cases",
    "read_cases",
    "write_cases",
]
