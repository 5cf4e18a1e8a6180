"""The action and observation models of the clinenv server (from clinenv itself)."""

from clinenv.integrations.openenv import ClinAction, ClinObservation

__all__ = ["ClinAction", "ClinObservation"]
