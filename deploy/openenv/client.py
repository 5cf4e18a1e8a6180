"""The OpenEnv client of the clinenv server (from clinenv itself)."""

from clinenv.integrations.openenv import ClinenvClient

__all__ = ["ClinenvClient"]
