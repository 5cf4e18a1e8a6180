"""Reading a request's text against the demo case's exams: ids, names, lists."""

from __future__ import annotations

import gymnasium as gym


def _demo_env(**kwargs):
    env = gym.make("EGIP-Demo-v0", **kwargs).unwrapped
    env.reset(seed=0, options={"case_id": "demo-15"})
    return env


def test_words_after_an_id_without_a_separator_are_part_of_a_name():
    from clinenv.protocol.request_reading import read_request

    env = _demo_env()
    matcher = env.runtime.matcher
    assert read_request("T3 uptake", matcher).payload == "T3 uptake"
    assert read_request("T3 - uptake", matcher).payload == "T3"
    assert read_request("Complete Blood Count", matcher).reading == "exam"
    reading = read_request("Complete Blood Count, Urinalysis", matcher)
    assert reading.reading == "multiple" and reading.parts == ("Complete Blood Count",
                                                               "Urinalysis")
    # a list whose parts are not all recorded exams is one (missing) name
    assert read_request("Chest X-ray and CT angiography", matcher).reading == "exam"
