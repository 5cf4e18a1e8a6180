"""CDEG: the Counterfactual Diagnostic Evidence Graph (CDEG paper).

Construction from run logs, counterfactual validation, the graph file and the
evidence-state policy wrapper (docs/cdeg.md); public names load on first use.
"""

from clinenv.lazy import lazy_exports

#: Public names -> the module that defines them, imported on first use.
_EXPORTS = {
    "BuildConfig": "clinenv.wrappers.cdeg.build",
    "BuildResult": "clinenv.wrappers.cdeg.build",
    "build_graph": "clinenv.wrappers.cdeg.build",
    "CDEGConfig": "clinenv.wrappers.cdeg.policy",
    "CDEGDoctor": "clinenv.wrappers.cdeg.policy",
    "CDEGraph": "clinenv.wrappers.cdeg.graph",
    "GraphFileError": "clinenv.wrappers.cdeg.graph",
    "AtomExtractor": "clinenv.wrappers.cdeg.extractors",
    "DeterministicExtractor": "clinenv.wrappers.cdeg.extractors",
    "LLMExtractor": "clinenv.wrappers.cdeg.extractors",
    "LLMVerifier": "clinenv.wrappers.cdeg.verifier",
    "LexicalVerifier": "clinenv.wrappers.cdeg.verifier",
    "Verifier": "clinenv.wrappers.cdeg.verifier",
    "ConstructionOverlapWarning": "clinenv.wrappers.cdeg.heldout",
}
__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
