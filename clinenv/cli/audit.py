"""``clinenv audit ENV_ID``: the information-boundary audit (:mod:`clinenv.audit`).

Exit codes: 0 no leak, 1 a leak (:data:`EXIT_LEAKED`), 2 bad arguments or data; the
report and the seats it drives: docs/audit.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from clinenv.cli.argtypes import count
from clinenv.cli.env_choice import (
    add_dataset_arguments,
    add_variation_arguments,
    add_verify_argument,
    env_config,
    make_env,
)
from clinenv.cli.errors import CLIError

#: Exit code of an audit that found a leak.
EXIT_LEAKED = 1


def add_audit_parser(sub: Any) -> None:
    """Add the ``audit`` sub-command to ``sub``."""
    from clinenv.audit.seats import EXAMINER_SEATS, PATIENT_SEATS
    from clinenv.protocol.biases import PATIENT_BIASES

    audit = sub.add_parser(
        "audit", help="check that neither Y nor an unrequested result reaches the doctor",
        description="Drive every case with adversarial doctor turns (prompt injection, "
                    "requests for all results, questions about the diagnosis, forged "
                    "markers) and report each leak of the target or of an unrequested "
                    "recorded result into the doctor's input; exit 1 on a leak.")
    audit.add_argument("env_id", metavar="ENV_ID",
                       help="environment id, e.g. EGIP-MedQA-v0 or AgentClinic-MedQA-v0")
    audit.add_argument("--patient", choices=PATIENT_SEATS, default="retrieval",
                       help="patient seat: the retrieval simulator (default) or the LLM "
                            "patient over an over-sharing fake model (offline)")
    audit.add_argument("--patient-bias", choices=PATIENT_BIASES, default=None,
                       metavar="NAME",
                       help="--patient llm: one of AgentClinic's patient biases; what its "
                            "text puts in the patient's mouth is reported apart (placement "
                            "'bias'), not as a leak")
    audit.add_argument("--examiner", choices=EXAMINER_SEATS, default="default",
                       help="examiner seat: the id's own (default: record lookup under "
                            "EGIP, the record reader under a native protocol), or the LLM "
                            "measurement agent over the over-sharing fake model")
    audit.add_argument("--preset", default=None, metavar="NAME",
                       help="an environment preset (e.g. egip-no-menu)")
    audit.add_argument("--cases", type=Path, default=None, metavar="FILE",
                       help="audit only the cases of this case list (one case_id a line)")
    audit.add_argument("--limit", type=count(1), default=None, metavar="N",
                       help="audit only the first N cases")
    audit.add_argument("--json", default=None, metavar="FILE",
                       help="also write the report as JSON to FILE ('-': stdout, instead "
                            "of the text)")
    audit.add_argument("--max-listed", type=count(0), default=50, metavar="N",
                       help="findings listed in the text report per section (default: 50)")
    add_dataset_arguments(audit)
    add_verify_argument(audit)
    add_variation_arguments(audit)
    audit.set_defaults(func=cmd_audit)


def cmd_audit(args: argparse.Namespace) -> int:
    """``clinenv audit`` (docs/audit.md); 0 when nothing leaked, else 1.

    Raises:
        CLIError: an unknown id or preset, missing data, an unreadable case list or an
            id it lists that the dataset lacks, a ``--json`` file that cannot be written.
    """
    from clinenv.audit.runner import run_audit
    from clinenv.case_list import CaseListError, read_case_list
    from clinenv.llm.base import BackendUnavailableError

    cases = None
    if args.cases is not None:
        try:
            cases = read_case_list(args.cases)
        except (OSError, CaseListError) as err:
            raise CLIError(f"--cases {args.cases}: {err}") from None
    if args.json not in (None, "-") and not Path(args.json).parent.is_dir():
        raise CLIError(f"--json {args.json}: no such folder {Path(args.json).parent}")
    config = env_config(args)  # the data options, --preset and --patient-bias

    def make(env_id: str, **kwargs: Any) -> Any:
        try:
            return make_env(env_id, config, **kwargs)
        except KeyError as err:  # gymnasium: an id that is not registered
            raise CLIError(f"cannot make {env_id!r}: {err.args[0] if err.args else err}"
                           ) from None

    try:
        report = run_audit(args.env_id, patient=args.patient, examiner=args.examiner,
                           case_ids=cases, limit=args.limit, make=make)
    except CaseListError as err:
        raise CLIError(str(err)) from None
    except BackendUnavailableError as err:  # the offline LLM seats talk over HTTP
        raise CLIError(f"--patient/--examiner llm: {err}") from None
    data = report.to_dict()
    if args.json == "-":
        json.dump(data, sys.stdout, ensure_ascii=False, indent=1)
        print()
    else:
        print(report.to_text(max_listed=args.max_listed))
        if args.json is not None:
            try:
                Path(args.json).write_text(json.dumps(data, ensure_ascii=False, indent=1)
                                           + "\n", encoding="utf-8")
            except OSError as err:
                raise CLIError(f"--json {args.json}: {err}") from None
            print(f"wrote {args.json}")
    return 0 if report.passed else EXIT_LEAKED
