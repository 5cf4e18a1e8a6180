"""CDEG's thresholds, defined once (CDEG paper, "Implementation Details").

Pairing > 0.7, evidence match >= 0.72, diagnosis match >= 0.65, coverage > 0.6, for
encoder cosines (lexical: :data:`clinenv.embeddings.lexical.LEXICAL_THRESHOLDS`).
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
