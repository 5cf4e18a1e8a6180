"""Turn boundaries: a model reply is only the text of its own turn.

:func:`cut_turn` cuts at chat-template tokens (:data:`TURN_TOKENS`) and other speakers'
lines (:data:`SPEAKERS`) for every seat that reads a model reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

Seat = Literal["doctor", "patient", "examiner", "judge"]

#: Chat-template tokens that end or open a turn, by family; any ``<|...|>`` special token
#: (Llama 3's ``<|eom_id|>``, Cohere's ``<|END_OF_TURN_TOKEN|>``, gpt-oss's ``<|start|>``,
#: Granite's ``<|start_of_role|>``...) and DeepSeek's full-width ``<｜...｜>`` ones count
#: too (:data:`_TOKEN`).
TURN_TOKENS: Final = (
    "<|im_end|>", "<|im_start|>",                       # ChatML (Qwen, SmolLM)
    "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>",  # Llama 3
    "<end_of_turn>", "<start_of_turn>", "<eos>",        # Gemma
    "[INST]", "[/INST]", "</s>",                        # Mistral / Llama 2
    "<|end|>", "<|user|>", "<|assistant|>", "<|system|>",  # Phi-3
    "<|endoftext|>", "<｜end▁of▁sentence｜>", "<｜User｜>",  # GPT-2 family, DeepSeek
)  # fmt: skip
#: Role words that may follow a turn-opening token for the model's own turn.
_OWN_ROLES = r"(?:assistant|model|doctor|bot|gpt)"

#: Speaker labels that open a turn at the start of a line, and the seat each belongs to
#: (``None``: a generic chat role, never a seat's own label).
SPEAKERS: Final[dict[str, Seat | None]] = {
    "doctor": "doctor", "physician": "doctor",
    "patient": "patient", "parent": "patient", "caregiver": "patient",
    "examiner": "examiner", "measurement": "examiner", "measurement agent": "examiner",
    "judge": "judge", "moderator": "judge",
    "user": None, "assistant": None, "system": None, "human": None, "interface": None,
}  # fmt: skip

_LABEL = "|".join(sorted((re.escape(k).replace(r"\ ", r"\s+") for k in SPEAKERS),
                         key=len, reverse=True))
#: A speaker label opening a line: optional markdown, the label, an optional bracketed
#: note (``Examiner [T1 CBC]:``, ``Patient (asked "..."):``), a colon.
_SPEAKER_LINE = re.compile(
    rf"^[ \t]*(?:[*_#>]+[ \t]*)?({_LABEL})[ \t]*(?:\([^)\n]*\)|\[[^\]\n]*\])?[ \t]*"
    r"(?:[*_]+[ \t]*)?:(?:[*_]+)?",
    re.IGNORECASE | re.MULTILINE,
)
_TOKEN = re.compile("|".join([*(re.escape(t) for t in TURN_TOKENS),
                               r"<\|[\w.\-]{1,40}\|>", r"<｜[^｜\n]{1,40}｜>"]), re.IGNORECASE)
#: A reply that opens with its own turn header (``<|im_start|>assistant``, ``<|start_
#: header_id|>assistant<|end_header_id|>``, ``<start_of_turn>model``, ``[/INST]``,
#: ``<s>``): stripped, like a self-label.
_OWN_HEADER = re.compile(
    rf"^(?:\s*(?:<s>|<bos>|\[/INST\]|<\|assistant\|>|<｜Assistant｜>"
    rf"|(?:<\|im_start\|>|<\|start_header_id\|>|<start_of_turn>|<\|start_of_role\|>"
    rf"|<\|start\|>)\s*{_OWN_ROLES}\b\s*(?:<\|end_header_id\|>|<\|end_of_role\|>"
    rf"|<\|message\|>)?))+",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class TurnCut:
    """One reply cut to its own turn.

    Attributes:
        text: the seat's own turn (self-label removed, surrounding whitespace stripped).
        wrote_past_turn: the reply went on past a turn boundary; the rest was dropped.
        boundary: the token or speaker label that ended the turn (``"<|im_end|>"``,
            ``"Patient:"``...), or ``None``.
        label_stripped: a leading self-label (``Doctor:`` from the doctor) was removed.
    """

    text: str
    wrote_past_turn: bool = False
    boundary: str | None = None
    label_stripped: bool = False

    @property
    def flags(self) -> list[str]:
        """``["wrote_past_turn"]`` when the reply was cut, else ``[]``."""
        return ["wrote_past_turn"] if self.wrote_past_turn else []


def _own(label: str) -> Seat | None:
    return SPEAKERS.get(re.sub(r"\s+", " ", label.lower()))


def speaker_line(line: str) -> str | None:
    """The speaker label opening ``line`` (``"patient"``, ``"doctor"``...), or ``None``."""
    match = _SPEAKER_LINE.match(line)
    return re.sub(r"\s+", " ", match.group(1).lower()) if match else None


def _is_self_label(label: str, seat: Seat) -> bool:
    """A label a seat may open its own reply with: its own, or the generic
    ``Assistant:``."""
    return _own(label) == seat or label.lower() == "assistant"


def cut_turn(text: str, seat: Seat, *, speaker_lines: bool = True) -> TurnCut:
    """The part of ``text`` that is ``seat``'s own turn. Never raises.

    Args:
        text: a model reply, any length (``None`` and non-strings read as text).
        seat: ``"doctor"``, ``"patient"``, ``"examiner"`` or ``"judge"``; its own labels
            (e.g. ``Patient:`` for the patient) do not end its turn, and one at the very
            start is stripped, as is a leading own turn header (``<|im_start|>assistant``);
            a doctor reply that opens with another speaker's label is all past its turn
            (the simulators' replies keep their own reading of a leading label).
        speaker_lines: also end the turn at a new line opening another speaker's turn;
            ``False`` cuts at chat-template tokens only (a final answer may list
            ``Patient: ...`` findings before its ``DIAGNOSIS READY:`` line).

    Returns:
        A :class:`TurnCut`. ``cut_turn("Why?<|im_end|>Patient: ...", "doctor").text`` is
        ``"Why?"``.
    """
    return TurnCut(*_cut(text, seat, speaker_lines))


def own_turn(text: str, seat: Seat, *, speaker_lines: bool = True) -> tuple[str, bool]:
    """``(text, wrote_past_turn)`` of :func:`cut_turn`, without building the
    :class:`TurnCut` (the doctor-action parser reads only these two)."""
    own, past, _, _ = _cut(text, seat, speaker_lines)
    return own, past


def _cut(text: str, seat: Seat, speaker_lines: bool) -> tuple[str, bool, str | None, bool]:
    """The fields of :func:`cut_turn`'s :class:`TurnCut`, in order."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    stripped = False
    if "<" in text or "[" in text:
        header = _OWN_HEADER.match(text)
        if header:
            text, stripped = text[header.end():], True
    labelled = ":" in text  # cheap tests first: most replies hold no boundary at all
    head = _SPEAKER_LINE.match(text.lstrip()) if labelled else None
    if head and _is_self_label(head.group(1), seat):
        text, stripped = text.lstrip()[head.end():], True
    elif head and speaker_lines and seat == "doctor":  # all of it another speaker's turn
        return "", True, head.group(1).strip() + ":", stripped
    ends: list[tuple[int, str]] = []
    token = _TOKEN.search(text) if ("<" in text or "[" in text) else None
    if token:
        ends.append((token.start(), token.group(0)))
    lines = speaker_lines and labelled and "\n" in text
    for line in (_SPEAKER_LINE.finditer(text) if lines else ()):
        if _own(line.group(1)) != seat and text[:line.start()].strip():
            ends.append((line.start(), line.group(1).strip() + ":"))
            break
    if not ends:
        return text.strip(), False, None, stripped
    at, boundary = min(ends)
    return text[:at].strip(), True, boundary, stripped


def stop_strings(seat: Seat, *, limit: int | None = None) -> tuple[str, ...]:
    """Stop strings for a call that prompts ``seat`` in clinenv's turn format: the
    other speakers' line labels clinenv renders (``"\\nPatient:"``, ``"\\nExaminer ["``)
    and the
    end-of-turn tokens, most important first.

    Args:
        seat: the seat the model speaks for.
        limit: keep only the first ``limit`` (the OpenAI API accepts at most 4); the
            client cuts at every boundary anyway (:func:`cut_turn`).
    """
    labels = {"doctor": ("Patient:", "Examiner ["), "patient": ("Doctor:",),
              "examiner": ("Doctor:", "Patient:"), "judge": ("Doctor:", "Patient:")}[seat]
    stops = (*(f"\n{label}" for label in labels), "<|im_end|>", "<|eot_id|>",
             "<end_of_turn>", "\nUser:")
    return stops if limit is None else stops[:limit]
