"""An over-sharing chat model for the audit's LLM seats (served by the fake server).

:func:`oversharing_responder` answers every patient or measurement-agent turn with all
its system prompt holds; other seats get the clinician responder's reply.
"""

from __future__ import annotations

from clinenv.testing.fake_responders import clinician_responder, content_text, role_of

#: Seats whose reply is their whole system prompt.
OVERSHARING_ROLES = ("patient", "measurement")


def oversharing_responder(body: dict, index: int) -> str:
    """The reply to one chat request; ``index`` is ignored.

    A patient or measurement seat gets its whole system prompt, one line (the prompt's
    lines joined by ``" | "``); every other seat gets
    :func:`clinenv.testing.fake_responders.clinician_responder`'s reply.
    """
    if role_of(body) not in OVERSHARING_ROLES:
        return clinician_responder(body, index)
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = content_text(messages[0].get("content")) if messages else ""
    lines = [line.strip() for line in system.splitlines() if line.strip()]
    return " | ".join(lines) or "I have nothing to report."
