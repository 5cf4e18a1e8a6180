"""An over-sharing chat model for the audit's LLM seats (served by the fake server).

:func:`oversharing_responder` is a :mod:`clinenv.testing.fake_server` responder that
plays the patient and the measurement agent as the worst model would: whatever the
doctor says, it replies with everything its system prompt holds (one line, the prompt's
lines joined by ``" | "``). A seat whose prompt held Y, or records the doctor did not
request, would so put them in the doctor's input; a seat whose prompt holds only what
its view permits leaks nothing. Every other seat (the judge, terminal strategies...)
gets :func:`clinenv.testing.fake_responders.clinician_responder`'s reply.
"""

from __future__ import annotations

from clinenv.testing.fake_responders import clinician_responder, content_text, role_of

#: Seats whose reply is their whole system prompt.
OVERSHARING_ROLES = ("patient", "measurement")


def oversharing_responder(body: dict, index: int) -> str:
    """The reply to one chat request (module docstring); ``index`` is ignored."""
    if role_of(body) not in OVERSHARING_ROLES:
        return clinician_responder(body, index)
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = content_text(messages[0].get("content")) if messages else ""
    lines = [line.strip() for line in system.splitlines() if line.strip()]
    return " | ".join(lines) or "I have nothing to report."
