"""Load cases and look at what an environment will be built from.

Shows :func:`clinenv.load_cases`: the bundled ``"demo"`` set always, and AgentClinic's
MedQA file when ``CLINENV_DATA_DIR`` (or ``--data-dir``) points at a folder holding
``agentclinic_medqa.jsonl``. For each case it prints the size of its examination catalog
A (physical-exam sections ``PE*`` and tests ``T*``, built from the stored records without
reading any result), whether it has candidate labels K, and its data-quality flags (e.g.
``target_in_records``: a record names the diagnosis).

Run from the repository root::

    python examples/load_cases.py
    CLINENV_DATA_DIR=/path/to/agentclinic python examples/load_cases.py
"""

from __future__ import annotations

import os
import sys

import clinenv
from clinenv.protocol import Catalog


def describe(name: str) -> None:
    cases = clinenv.load_cases(name)
    print(f"== {name}: {len(cases)} cases")
    for case in cases:
        catalog = Catalog(case.records)
        n_pe = sum(entry.exam_id.startswith("PE") for entry in catalog.entries)
        flags = [key if value is True else f"{key}={value}"
                 for key, value in case.flags.model_dump().items() if value]
        k = f"K={len(case.candidates)}" if case.candidates else "no K"
        print(f"{case.case_id}: catalog {len(catalog)} exams ({n_pe} PE, "
              f"{len(catalog) - n_pe} T), {k}, flags: {', '.join(flags) or '-'}")


def main() -> int:
    describe("demo")
    if os.environ.get("CLINENV_DATA_DIR"):
        describe("medqa")
    else:
        print("(set CLINENV_DATA_DIR to a folder with agentclinic_medqa.jsonl to list MedQA)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
