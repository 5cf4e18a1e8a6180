"""Size and open time of a 10,000-episode ``clinenv report`` page in headless Chromium.

Two real run logs are made first: the scripted doctor on the bundled demo cases (17)
under AgentClinic's native loop and under EGIP (``clinenv run``). Their lines are
replicated with new case ids (``demo-01-c0001``...; ``case_index`` and
``n_cases_scheduled`` follow) until the two logs hold ``--episodes`` lines together
(default 10,000: 5,000 per method), so the report has two methods and every episode a
side-by-side partner. ``--unique-text`` also appends the copy number to every question,
reply, exam result, answer and observation, so that no two episodes share text (the
worst case for the page's string table; real runs share case text across repetitions
and methods, as the plain replication does).

Measured:

- build: wall seconds of ``clinenv report`` (in process, figures included) and the
  page's size in MB (10^6 bytes);
- open, in headless Chromium (Debian's ``chromium`` + ``chromedriver`` via Selenium,
  the ``browser`` extra), median of ``--loads`` fresh loads: navigationStart → load
  event end, and navigationStart → the first episode rendered (the page's
  ``window.__reportTimings.firstEpisode``);
- interaction: the next page of the episode list and a verdict filter over every
  episode, milliseconds from the click to the rendered list (median of 5).

Usage::

    python benchmarks/bench_report.py [--episodes N] [--loads K] [--unique-text]
                                      [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from clinenv.cli import main

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1400,2000")


def demo_logs(folder: Path) -> list[Path]:
    """``[native.jsonl, egip.jsonl]`` of the scripted doctor on the demo cases."""
    out = []
    for env, name in (("AgentClinic-Demo-v0", "native.jsonl"), ("EGIP-Demo-v0", "egip.jsonl")):
        path = folder / name
        if main(["run", "--env", env, "--doctor", "scripted", "--quiet", "--out",
                 str(path)]) != 0:
            raise SystemExit(f"clinenv run --env {env} failed")
        out.append(path)
    return out


def _tag(value, suffix: str):
    return f"{value} {suffix}" if isinstance(value, str) else value


def replicate(source: Path, out: Path, n: int, unique: bool) -> int:
    """Write ``n`` lines made from ``source``'s lines with new case ids; returns ``n``."""
    lines = [json.loads(t) for t in source.read_text(encoding="utf-8").splitlines()]
    n_copies = -(-n // len(lines))
    with out.open("w", encoding="utf-8") as fh:
        written = 0
        for k in range(n_copies):
            for line in lines:
                if written == n:
                    break
                copy = json.loads(json.dumps(line))
                copy["case_id"] = f"{line['case_id']}-c{k:04d}"
                copy["case_index"] = line["case_index"] + len(lines) * k
                copy["n_cases_scheduled"] = len(lines) * n_copies
                if unique:
                    tag = f"[copy {k}]"
                    for event in copy["events"]:
                        for key in ("text", "reply", "recorded_value", "message"):
                            if key in event:
                                event[key] = _tag(event[key], tag)
                    for obs in copy["evidence"]["observations"]:
                        obs["content"] = _tag(obs["content"], tag)
                    copy["answer"] = _tag(copy["answer"], tag)
                fh.write(json.dumps(copy, ensure_ascii=False) + "\n")
                written += 1
    return written


def chromium():
    """A Selenium driver on headless Chromium, or ``SystemExit`` saying what is missing."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise SystemExit("selenium is missing: pip install -e '.[browser]'") from None
    binary = os.environ.get("CLINENV_CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("CLINENV_CHROMEDRIVER") or shutil.which("chromedriver")
    if not binary or not driver:
        raise SystemExit("no chromium / chromedriver: apt-get install -y chromium "
                         "chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='bench-chromium-')}")
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


_LOAD = """
var t = performance.timing, r = window.__reportTimings;
return {load: t.loadEventEnd - t.navigationStart,
        first: r.firstEpisode + performance.timeOrigin - t.navigationStart};
"""
_CLICK = """
var start = performance.now();
%s
return performance.now() - start;
"""


def measure_open(page: Path, loads: int) -> dict[str, float]:
    from selenium.webdriver.support.ui import WebDriverWait

    driver = chromium()
    try:
        loaded, first = [], []
        for _ in range(loads):
            driver.get("about:blank")
            driver.get(page.as_uri())
            WebDriverWait(driver, 60).until(
                lambda d: d.execute_script("return performance.timing.loadEventEnd > 0"))
            got = driver.execute_script(_LOAD)
            loaded.append(got["load"])
            first.append(got["first"])
        pages = [driver.execute_script(_CLICK % "document.getElementById('page-next').click();")
                 for _ in range(5)]
        filters = []
        for value in ("correct", "", "wrong", "", "unscored"):
            change = ("var s = document.getElementById('filter-verdict'); s.value = "
                      + json.dumps(value) + "; s.dispatchEvent(new Event('change'));")
            filters.append(driver.execute_script(_CLICK % change))
        count = driver.execute_script(
            "return document.querySelector('#filters .count').textContent")
    finally:
        driver.quit()
    return {"load_ms": statistics.median(loaded), "first_ms": statistics.median(first),
            "next_page_ms": statistics.median(pages), "filter_ms": statistics.median(filters),
            "count": count}


def run(args: argparse.Namespace) -> None:
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-report-"))
    folder.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CLINENV_DATA_DIR", str(folder / "no-data"))
    (folder / "no-data").mkdir(exist_ok=True)
    native, egip = demo_logs(folder)
    half = args.episodes // 2
    big = [folder / "native-big.jsonl", folder / "egip-big.jsonl"]
    replicate(native, big[0], half, args.unique_text)
    replicate(egip, big[1], args.episodes - half, args.unique_text)
    log_mb = sum(p.stat().st_size for p in big) / 1e6
    page = folder / "report.html"
    start = time.perf_counter()
    if main(["report", *map(str, big), "--out", str(page)]) != 0:
        raise SystemExit("clinenv report failed")
    build_s = time.perf_counter() - start
    size_mb = page.stat().st_size / 1e6
    got = measure_open(page, args.loads)
    text = " (unique text per episode)" if args.unique_text else ""
    print(f"episodes           {args.episodes}{text}; run logs {log_mb:.1f} MB")
    print(f"report             {size_mb:.2f} MB, built in {build_s:.1f} s ({page})")
    print(f"open (median of {args.loads}) load event {got['load_ms']:.0f} ms, first episode "
          f"rendered {got['first_ms']:.0f} ms after navigationStart")
    print(f"interaction        next page {got['next_page_ms']:.1f} ms, verdict filter "
          f"{got['filter_ms']:.1f} ms (last: {got['count']})")
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--unique-text", action="store_true")
    parser.add_argument("--keep", default=None, metavar="DIR",
                        help="write the logs and the page here and keep them")
    args = parser.parse_args(argv)
    if args.episodes < 2 or args.loads < 1:
        parser.error("--episodes must be >= 2 and --loads >= 1")
    return args


if __name__ == "__main__":
    run(parse(sys.argv[1:]))
