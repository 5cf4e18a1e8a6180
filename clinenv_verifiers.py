"""The verifiers taskset ``clinenv-verifiers`` (verifiers imports a taskset by id as a
top-level module): :mod:`clinenv.integrations.verifiers`'s taskset and environment."""

from clinenv.integrations.verifiers import ClinenvEnv, ClinenvTaskset

__all__ = ["ClinenvEnv", "ClinenvTaskset"]
