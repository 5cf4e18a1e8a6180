"""The HTML run report (``clinenv report LOGS... --out report.html``).

:func:`build_report` / :func:`write_report` (:mod:`clinenv.report.page`); the page and
its data are described in docs/report.md.
"""

from clinenv.report.access import DUA_WARNING, is_credentialed
from clinenv.report.divergence import doctor_actions, first_divergence
from clinenv.report.episodes import episode_view
from clinenv.report.island import ISLAND_ID, StringTable, island_json
from clinenv.report.page import Report, ReportError, build_report, write_report

__all__ = ["DUA_WARNING", "ISLAND_ID", "Report", "ReportError", "StringTable",
           "build_report", "doctor_actions", "episode_view", "first_divergence",
           "is_credentialed", "island_json", "write_report"]
