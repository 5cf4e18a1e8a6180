"""Trainer adapters over one tool view of the doctor's actions.

:mod:`clinenv.integrations.tools` holds the tool view; each trainer has one module
behind its own extra (docs/training.md). The core never imports this package.
"""
