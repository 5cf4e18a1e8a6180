"""Reward magnitudes, named in one place.

The doctor's reward is terminal: :data:`CORRECT` when the scorer judges the final answer
correct, :data:`WRONG` otherwise (an unscored non-answer earns :data:`UNSCORED`). Optional
shaping terms default to zero so that returns equal accuracy, the papers' metric (EGIP
section 4.1); set them through environment kwargs for RL experiments.
"""

CORRECT = 1.0
WRONG = 0.0
UNSCORED = 0.0
#: Default amount subtracted per invalid action (empty, unknown id, ambiguous or unclear
#: name, repeat without clarification).
INVALID_ACTION_PENALTY = 0.0
#: Default amount subtracted per examination test returned.
EXAM_COST = 0.0
