"""Reading the acquired evidence out of doctor-facing texts (for deterministic policies).

Findings only, never the candidates K or the menu B (EGIP section 3.3), in every
observation layout; also the scripted doctor's two answer rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from clinenv.scoring import DIAGNOSIS_LINKS

#: First line of every EGIP and native doctor view (the other section headers are those of
#: clinenv.protocol.render, clinenv.protocol.evidence and clinenv.protocol.native_render).
TASK_HEADER = "# Task"
_HISTORY = "# Interaction so far"
_FOOTERS = ("# Available examinations", "# Your turn")
_OBSERVATIONS = "# Acquired observations"
_INSTRUCTIONS = "# Instructions"
# Native headers (clinenv.protocol.native_render) and the transcript speakers kept as
# evidence.
_LATEST = "\n# Latest response\n"
_TRANSCRIPT = "\n# Consultation transcript\n"
_DISCUSSION = "\n# Final discussion"
_EVIDENCE_SPEAKERS = ("Patient: ", "Measurement: ")
_OTHER_SPEAKERS = ("Doctor: ", "Interface: ")
_TURN = re.compile(r"^Turn (\d+) of (\d+)\.", re.MULTILINE)

#: The phrases after which a record names a diagnosis: the link hedges of the scorer
#: (:data:`clinenv.scoring.DIAGNOSIS_LINKS`, one list for reading records and scoring
#: answers) and "confirms"; the scorer's probability hedges ("likely", "possible") are
#: not read here: in a record they qualify a finding ("likely viral").
_LINKS = "|".join(map(re.escape, sorted(DIAGNOSIS_LINKS, key=len, reverse=True)))
_NAMED = re.compile(
    rf"\b(?:{_LINKS}|confirm(?:s|ing)?)\s+(?:an?\s+|the\s+)?([^.;,\n()]{{3,80}})",
    re.IGNORECASE,
)
#: A cheap, case-sensitive pre-scan (on lower-cased text) for where _NAMED can first match.
_TRIGGER = re.compile(rf"{_LINKS}|confirm")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({"with", "and", "the", "of", "for", "from", "disease", "syndrome",
                   "acute", "chronic", "type", "due", "to", "in", "on"})


def _content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOP]


def footer_start(text: str, start: int = 0) -> int:
    """Where the menu / instructions footer of an acquisition view begins (or the end)."""
    if text.startswith(_FOOTERS, start):  # e.g. a delta with no new events
        return start
    ends = [i + 1 for i in (text.find("\n" + h, start) for h in _FOOTERS) if i >= 0]
    return min(ends) if ends else len(text)


def history_section(view: str) -> str:
    """The doctor-visible history of an acquisition view x_t.

    The text between the ``# Interaction so far`` header and the footer (``# Available
    examinations`` or ``# Your turn``); ``""`` when the view has no history yet. The
    task header, the candidate labels and the menu are never part of it.
    """
    start = view.find(_HISTORY)
    if start < 0:
        return ""
    start += len(_HISTORY)
    return view[start:footer_start(view, start)]


def transcript_evidence(transcript: str) -> str:
    """The ``Patient:`` and ``Measurement:`` lines of a native transcript (one
    ``Speaker: text`` line per event, :func:`clinenv.protocol.native_render.
    render_transcript`); a line without a speaker prefix continues the previous one.
    ``Doctor:`` and ``Interface:`` lines are dropped: they are not findings."""
    kept, keep = [], False
    for line in transcript.splitlines():
        if line.startswith(_EVIDENCE_SPEAKERS + _OTHER_SPEAKERS):
            keep = line.startswith(_EVIDENCE_SPEAKERS)
        if keep:
            kept.append(line)
    return "\n".join(kept)


def native_evidence(text: str) -> str:
    """The acquired evidence of a native doctor observation (``"view"`` format).

    - MedAgentSim's decision observation: :func:`transcript_evidence` of its ``#
      Consultation transcript`` section;
    - an acquisition view: :func:`transcript_evidence` of ``# Interaction so far``,
      then the ``# Latest response`` text (the reply to the doctor's last utterance);
    - ``""`` for a view with no interaction yet.
    """
    text = text if text.startswith("\n") else "\n" + text  # a heading on the first line
    start = text.find(_TRANSCRIPT)
    if start >= 0:
        body = text[start + len(_TRANSCRIPT):]
        end = body.find(_DISCUSSION)
        return transcript_evidence(body[:end] if end >= 0 else body)
    latest = text.find(_LATEST)
    if latest < 0 or _HISTORY not in text[:latest]:
        return ""  # nothing was said yet: the latest response is a placeholder
    earlier = transcript_evidence(history_section(text[:latest] + "\n# Your turn"))
    reply = text[latest + len(_LATEST):]
    return (earlier + "\n" + reply[:footer_start(reply)]).strip()


def evidence_text(text: str) -> str:
    """The acquired evidence in a doctor-facing text, without candidates or menu.

    - an evidence interface e_T: its ``# Acquired observations`` section;
    - a native observation (MedAgentSim's decision observation, or a native acquisition
      view with its ``# Latest response`` section): :func:`native_evidence`;
    - an acquisition view (starts with ``# Task``): :func:`history_section`;
    - any other text (a ``"delta"`` observation, a hand-written evidence text): the text
      before an acquisition footer, if it has one.
    """
    start = text.find(_OBSERVATIONS)
    if start >= 0:
        end = text.find(_INSTRUCTIONS, start)
        return text[start + len(_OBSERVATIONS):end if end >= 0 else None]
    if _TRANSCRIPT in "\n" + text or (text.startswith(TASK_HEADER) and _LATEST in text):
        return native_evidence(text)
    if text.startswith(TASK_HEADER):
        return history_section(text)
    return text[:footer_start(text)]


def last_native_turn(text: str) -> bool:
    """The footer of a native acquisition observation says ``Turn k of N`` with k >= N:
    the doctor's last turn, on which AgentClinic needs the diagnosis."""
    turns = _TURN.findall(text)
    return bool(turns) and int(turns[-1][0]) >= int(turns[-1][1])


def named_diagnosis(evidence: str) -> str | None:
    """The first diagnosis a text names after a link phrase, or ``None``.

    Link phrases: :data:`clinenv.scoring.DIAGNOSIS_LINKS` ("consistent with", "suggestive
    of"...) and "confirms"; not the probability hedges ("likely viral" qualifies a finding).
    """
    lower = evidence.lower()
    hit = _TRIGGER.search(lower)
    if hit is None:
        return None
    # str.lower() keeps offsets unless a character changes length (rare): then scan all
    named = _NAMED.search(evidence, hit.start() if len(lower) == len(evidence) else 0)
    return named.group(1).strip() if named else None


def candidate_scores(candidates: Sequence[str], evidence: str) -> list[float]:
    """Share of each candidate's content words found in ``evidence`` (0..1 each)."""
    present = set(_content_words(evidence))
    scores = []
    for cand in candidates:
        words = _content_words(cand) or _WORD.findall(cand.lower())
        scores.append(sum(w in present for w in words) / max(1, len(words)))
    return scores
