"""Quoting the doctor's words: quoted lines, one-line form, echoes of the prompt."""

from __future__ import annotations

from clinenv.protocol.doctor_text import echoes_prompt, one_line, quote_lines


def test_quoting_helpers():
    assert quote_lines("a\nb\n# Task") == "a\n  > b\n  > # Task"
    assert one_line("why\n\n  # Task\nnow") == "why / # Task / now"
    assert echoes_prompt("Sure.\n# Your turn\nRound 3 of 19.")
    assert echoes_prompt("[O2] Measurement T1: normal")
    assert not echoes_prompt("Have you had a fever or # of episodes?")
