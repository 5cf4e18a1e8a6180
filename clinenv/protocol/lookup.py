"""Record lookup O: the examiner oracle that answers from stored records only.

A request that matches no record is ``not_recorded``, never "normal" (AgentClinic
weakness W1); a record of placeholders only is ``unavailable`` (EGIP section 3.2).
"""

from __future__ import annotations

from pydantic import JsonValue

from clinenv.cases import Records
from clinenv.datasets.availability import is_unavailable
from clinenv.protocol.catalog import CatalogEntry, readable_name
from clinenv.protocol.history import Availability

#: Text shown for a test the record does not hold.
NOT_RECORDED_TEXT = "Not recorded: this case's records hold no result for this examination."
#: Text shown in place of a placeholder leaf.
UNAVAILABLE_TEXT = "result not available"


def record_at(records: Records, path: tuple[str, ...]) -> JsonValue:
    """The stored subtree at ``path`` (first key ``physical_exam`` or ``tests``).

    Raises:
        KeyError: the path does not exist in ``records``.
    """
    node: JsonValue = records.physical_exam if path[0] == "physical_exam" else records.tests
    for key in path[1:]:
        if not isinstance(node, dict):
            raise KeyError(path)
        node = node[key]
    return node


def render_record(value: JsonValue, indent: int = 0) -> str:
    """Render a stored subtree as readable text; placeholder leaves are marked.

    ``{"WBC": "12,000/mm3", "Hb": "Pending"}`` renders as two lines
    ``WBC: 12,000/mm3`` and ``Hb: result not available (Pending)``.
    """
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return f"{pad}{UNAVAILABLE_TEXT}"
        lines = []
        for key, child in value.items():
            if isinstance(child, dict) and child:
                lines.append(f"{pad}{readable_name(key)}:")
                lines.append(render_record(child, indent + 1))
            else:
                lines.append(f"{pad}{readable_name(key)}: {render_record(child).strip()}")
        return "\n".join(lines)
    if isinstance(value, list):
        return f"{pad}" + "; ".join(render_record(v).strip() for v in value)
    if is_unavailable(value):
        shown = "" if value is None else str(value).strip()
        return f"{pad}{UNAVAILABLE_TEXT}" + (f" ({shown})" if shown else "")
    if isinstance(value, bool):
        return f"{pad}{'yes' if value else 'no'}"
    return f"{pad}{value}"


def availability_of(value: JsonValue) -> Availability:
    """``unavailable`` when every leaf is a placeholder, else ``recorded``."""
    return "unavailable" if is_unavailable(value) else "recorded"


def lookup(records: Records, entry: CatalogEntry | None) -> tuple[str | None, Availability]:
    """Record lookup O for one catalog entry (``None`` for a miss).

    Returns:
        ``(recorded_value_text, availability)``; ``(None, "not_recorded")`` for a miss.
    """
    if entry is None:
        return None, "not_recorded"
    value = record_at(records, entry.source_path)
    return render_record(value), availability_of(value)
