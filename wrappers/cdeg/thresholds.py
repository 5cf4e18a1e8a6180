"""CDEG's thresholds, defined once (CDEG paper, "Implementation Details").

- :data:`PAIR_THRESHOLD` — trajectory pairing (Eq. 4): a pair is kept when the cosine of
  the τ_pre embeddings *exceeds* 0.7;
- :data:`EVIDENCE_THRESHOLD` — hybrid matching of observations to evidence nodes:
  SapBERT cosine >= 0.72;
- :data:`DIAGNOSIS_THRESHOLD` — matching a diagnosis to a diagnosis node "using the same
  procedure" (>= 0.65);
- :data:`COVERAGE_THRESHOLD` — retrieval of a revision edge when its coverage (Eq. 7)
  *exceeds* 0.6 (strict: "if its score exceeds a predefined threshold").

The values are meant for encoder cosines; for the lexical fallback see
:data:`clinenv.embeddings.lexical.LEXICAL_THRESHOLDS`.
"""

from __future__ import annotations

#: Eq. 4 pairing threshold (strict).
PAIR_THRESHOLD = 0.7
#: Evidence matching threshold (inclusive).
EVIDENCE_THRESHOLD = 0.72
#: Diagnosis matching threshold (inclusive).
DIAGNOSIS_THRESHOLD = 0.65
#: Coverage threshold of graph retrieval (strict).
COVERAGE_THRESHOLD = 0.6
