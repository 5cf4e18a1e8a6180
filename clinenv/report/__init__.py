"""The HTML run report (``clinenv report LOGS... --out report.html``).

One self-contained page with the accuracy table with CIs and coverage, the paired
comparisons and the reward components with their CIs (as ``clinenv eval --components``
/ ``clinenv compare``) and the figures, every episode with its reward components
(browsable and filterable by method, dataset, case, verdict, flag and stratum) and the
same case under two methods side by side with the first differing turn marked.

- :mod:`clinenv.report.page` — :func:`build_report`, :func:`write_report`, the page;
- :mod:`clinenv.report.episodes` — one run-log line as the report's episode view;
- :mod:`clinenv.report.divergence` — the first turn where two episodes' questions or
  requested exams differ;
- :mod:`clinenv.report.summary` — tables and figures (matplotlib, the ``plot`` extra);
- :mod:`clinenv.report.island` — the escaped JSON data island and its string table;
- :mod:`clinenv.report.access` — credentialed (MIMIC-IV) lines, refused by default;
- :mod:`clinenv.report.assets` — the inline CSS and script.
"""

from clinenv.report.access import DUA_WARNING, is_credentialed
from clinenv.report.divergence import doctor_actions, first_divergence
from clinenv.report.episodes import episode_view
from clinenv.report.island import ISLAND_ID, StringTable, island_json
from clinenv.report.page import Report, ReportError, build_report, write_report

__all__ = ["DUA_WARNING", "ISLAND_ID", "Report", "ReportError", "StringTable",
           "build_report", "doctor_actions", "episode_view", "first_divergence",
           "is_credentialed", "island_json", "write_report"]
