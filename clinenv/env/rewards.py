"""Reward magnitudes, named in one place.

Returns equal accuracy by default, the papers' metric (EGIP section 4.1).
"""

CORRECT = 1.0
WRONG = 0.0
UNSCORED = 0.0
#: Default amount subtracted per invalid action (empty, unknown id, ambiguous or unclear
#: name, repeat without clarification).
INVALID_ACTION_PENALTY = 0.0
#: Default amount subtracted per examination test returned.
EXAM_COST = 0.0
