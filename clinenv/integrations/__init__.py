"""Trainer adapters over one tool view of the doctor's actions.

:mod:`clinenv.integrations.tools` holds the tool view (``ask_patient``, ``order_exam``,
``submit_diagnosis``, ``list_exams``; their schemas; the mapping to and from action text;
:class:`~clinenv.integrations.tools.ToolEpisode`). Each framework has one module behind
its own extra: :mod:`clinenv.integrations.trl` (``clinenv[trl]``),
:mod:`clinenv.integrations.verl` (``clinenv[verl]``: a verl agent loop). The core never
imports this package.
"""
