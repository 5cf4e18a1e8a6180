"""The EGIP protocol (EGIP paper, section 3): catalog A, menu B, lookup O, the views and
renderer R, the doctor-text parser and the evidence interface E, one module each.

The public names below import from this package, each loaded on first use.
"""

from clinenv.lazy import lazy_exports

#: Public names -> the module that defines them, imported on first use.
_EXPORTS = {
    "Catalog": "clinenv.protocol.catalog", "CatalogEntry": "clinenv.protocol.catalog",
    "DoctorAction": "clinenv.protocol.parser", "parse_action": "clinenv.protocol.parser",
    "ProtocolConfig": "clinenv.protocol.config",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
