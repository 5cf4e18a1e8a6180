"""The report page in a real headless Chromium: it loads with no script error, the tables
and a transcript render, the filters work, the side-by-side view marks the first
differing turn, hostile log text renders as text, and a screenshot is kept.

Logs: the scripted doctor on the bundled demo cases under AgentClinic's native loop and
under EGIP (``clinenv run``), reported with ``clinenv report``; expected values are read
from the log lines.
"""

from __future__ import annotations

import pytest

from clinenv.cli import main
from clinenv.runlog import read_run_log
from clinenv.testing.report_pages import HOSTILE, demo_logs, hostile_log

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """``{"logs": (native, egip), "report": page, "hostile": page}``."""
    folder = tmp_path_factory.mktemp("report-browser")
    with pytest.MonkeyPatch.context() as mp:
        (folder / "no-data").mkdir()
        mp.setenv("CLINENV_DATA_DIR", str(folder / "no-data"))
        mp.setenv("XDG_CACHE_HOME", str(folder / "cache"))
        native, egip = demo_logs(folder)
        bad = hostile_log(egip, folder / "hostile.jsonl")
        report, hostile = folder / "report.html", folder / "hostile.html"
        assert main(["report", str(native), str(egip), "--out", str(report),
                     "--resamples", "500", "--flips", "500"]) == 0
        assert main(["report", str(bad), "--out", str(hostile), "--no-figures",
                     "--resamples", "50"]) == 0
    return {"logs": (native, egip), "report": report, "hostile": hostile}


def open_page(browser, path):
    browser.get(path.as_uri())
    browser.get_log("browser")  # nothing before this load
    browser.get(path.as_uri())
    assert browser.execute_script("return document.body.dataset.ready") == "1"
    return browser


def severe(browser):
    return [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]


def texts(browser, css):
    from selenium.webdriver.common.by import By

    return [e.text for e in browser.find_elements(By.CSS_SELECTOR, css)]


def test_page_loads_and_renders_tables_figures_and_a_transcript(browser, site, artifacts,
                                                                capsys):
    from selenium.webdriver.common.by import By

    open_page(browser, site["report"])
    assert severe(browser) == []
    timings = browser.execute_script("return window.__reportTimings")
    assert timings["start"] <= timings["firstEpisode"] <= timings["ready"]
    # the accuracy table: one row per method (3/17 and 4/17 correct on demo)
    rows = browser.find_elements(By.CSS_SELECTOR, "#tables table.stats")[0] \
        .find_elements(By.CSS_SELECTOR, "tbody tr")
    assert [[c.text for c in r.find_elements(By.TAG_NAME, "td")] for r in rows] == [
        ["scripted@agentclinic", "17.65 ± –", "23.53"], ["scripted", "23.53 ± –", "41.18"]]
    # both figures decoded (inline PNG, drawn with a width)
    widths = browser.execute_script(
        "return Array.from(document.querySelectorAll('#figures img'))"
        ".map(function (i) { return i.complete ? i.naturalWidth : 0; })")
    assert len(widths) == 2 and all(w > 100 for w in widths)
    # the first episode (native demo-01) opened: its transcript, one item per event
    native, _ = site["logs"]
    first = read_run_log(native).lines[0]
    items = browser.find_elements(By.CSS_SELECTOR, "#episode-detail > ol.transcript > li")
    assert len(items) == len(first["events"])
    assert first["events"][0]["text"] in items[0].text
    assert browser.find_element(By.CSS_SELECTOR, "#episode-detail h3").text == \
        "scripted@agentclinic · demo-01 · repetition 0"
    shot = artifacts / "report.png"
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, min(height, 12_000))  # the whole page, in one image
    browser.save_screenshot(str(shot))
    browser.set_window_size(1400, 2000)
    assert shot.stat().st_size > 10_000
    with capsys.disabled():
        print(f"\nscreenshot: {shot}")


def test_filters_select_episodes(browser, site):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    open_page(browser, site["report"])
    native, egip = site["logs"]
    lines = read_run_log(native).lines + read_run_log(egip).lines
    n_correct = sum(line["verdict"] == "correct" for line in lines)
    Select(browser.find_element(By.ID, "filter-verdict")).select_by_value("correct")
    assert browser.find_element(By.CSS_SELECTOR, "#filters .count").text == \
        f"{n_correct} of {len(lines)} episodes"
    verdicts = texts(browser, "#episode-list tr.episode-row td:nth-child(5)")
    assert verdicts == ["correct"] * n_correct
    Select(browser.find_element(By.ID, "filter-verdict")).select_by_value("")
    Select(browser.find_element(By.ID, "filter-method")).select_by_value("scripted")
    box = browser.find_element(By.ID, "filter-case")
    box.send_keys("demo-1")
    expected = sorted(line["case_id"] for line in read_run_log(egip).lines
                      if "demo-1" in line["case_id"])
    assert sorted(texts(browser, "#episode-list tr.episode-row td:nth-child(3)")) == expected
    assert set(texts(browser, "#episode-list tr.episode-row td:nth-child(1)")) == {"scripted"}
    # opening a row renders that episode
    browser.find_elements(By.CSS_SELECTOR, "#episode-list tr.episode-row")[0].click()
    assert browser.find_element(By.CSS_SELECTOR, "#episode-detail h3").text == \
        f"scripted · {expected[0]} · repetition 0"
    assert severe(browser) == []


def test_side_by_side_marks_the_first_differing_turn(browser, site):
    from selenium.webdriver.common.by import By

    open_page(browser, site["report"])
    browser.find_element(By.ID, "show-side-by-side").click()
    row = browser.find_element(By.ID, "diverge-turn")
    # demo-01: the native doctor asks for "Imaging" at turn 5, EGIP's for PE2
    assert row.find_element(By.CSS_SELECTOR, "td.turn").text == "5"
    left, right = row.find_elements(By.CSS_SELECTOR, "td:not(.turn)")
    assert "Imaging" in left.text and "PE2" in right.text
    assert browser.find_element(By.CSS_SELECTOR, "#pair-view .divergence").text == \
        "First turn where their questions or requested exams differ: turn 5."
    assert severe(browser) == []


def test_hostile_text_renders_as_text(browser, site):
    from selenium.webdriver.common.by import By

    open_page(browser, site["hostile"])
    assert severe(browser) == []
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.execute_script("return document.scripts.length") == 2
    # no element came from the log's text
    assert browser.execute_script("return document.querySelectorAll('b, img').length") == 0
    first_row = browser.find_elements(By.CSS_SELECTOR, "#episode-list tr.episode-row")[0]
    cells = [c.get_attribute("textContent") for c in first_row.find_elements(By.TAG_NAME, "td")]
    assert cells[5] == HOSTILE[0] and cells[6] == HOSTILE[1]
    shown = browser.execute_script(
        "return Array.from(document.querySelectorAll('#episode-detail .text'))"
        ".map(function (e) { return e.textContent; })")
    assert HOSTILE[2] in shown and HOSTILE[3] in shown
    objective = browser.execute_script(
        "return document.querySelector('#episode-detail .evidence p').textContent")
    assert objective == HOSTILE[4]


def test_side_by_side_steps_through_cases(browser, site, tmp_path):
    """EGIP against a copy of itself whose episodes 2, 5, 8... carry the native loop's
    events: those differ from turn 5, the others nowhere."""
    import json

    from selenium.webdriver.common.by import By

    native_path, egip_path = site["logs"]
    native, egip = read_run_log(native_path).lines, read_run_log(egip_path).lines
    mixed = []
    for i, line in enumerate(egip):
        copy = dict(line)
        if i % 3 == 2:
            copy["events"] = native[i]["events"]
        mixed.append(json.dumps(copy, ensure_ascii=False))
    (tmp_path / "mixed.jsonl").write_text("\n".join(mixed) + "\n", encoding="utf-8")
    page = tmp_path / "pair.html"
    assert main(["report", str(egip_path), f"mixed={tmp_path / 'mixed.jsonl'}", "--out",
                 str(page), "--no-figures", "--resamples", "50", "--flips", "50"]) == 0
    open_page(browser, page)
    position = "#pair-view .pair-position"

    def shown():
        return browser.find_element(By.CSS_SELECTOR, position).text

    assert shown() == f"case 1 of 17: {egip[0]['case_id']}, repetition 0"
    assert browser.find_elements(By.ID, "diverge-turn") == []
    browser.find_element(By.ID, "pair-next").click()
    assert shown() == f"case 2 of 17: {egip[1]['case_id']}, repetition 0"
    browser.find_element(By.ID, "pair-prev").click()
    assert shown() == f"case 1 of 17: {egip[0]['case_id']}, repetition 0"
    browser.find_element(By.ID, "pair-differing").click()
    for k in (2, 5, 8):
        browser.find_element(By.ID, "pair-next").click()
        assert shown() == f"case {k + 1} of 17: {egip[k]['case_id']}, repetition 0"
        assert browser.find_element(By.CSS_SELECTOR, "#diverge-turn td.turn").text == "5"
    assert severe(browser) == []


def test_components_table_and_each_episode_show_the_logged_components(browser, site):
    """The components table (after the accuracy and comparison tables) has one row per
    method and component; the opened episode shows its line's reward_components."""
    from selenium.webdriver.common.by import By

    from clinenv.reward_components import COMPONENTS

    def shown(value):
        if value is None:
            return "–"
        return str(int(value)) if float(value).is_integer() else f"{value:.3f}"

    open_page(browser, site["report"])
    tables = browser.find_elements(By.CSS_SELECTOR, "#tables table.stats")
    assert len(tables) == 3
    rows = [[c.text for c in r.find_elements(By.TAG_NAME, "td")]
            for r in tables[2].find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert [(r[0], r[2]) for r in rows] == [
        (label, name) for label in ("scripted@agentclinic", "scripted") for name in COMPONENTS]
    native, egip = site["logs"]
    for path, label in ((native, "scripted@agentclinic"), (egip, "scripted")):
        first = read_run_log(path).lines[0]
        browser.find_element(By.CSS_SELECTOR,
                             f"#episode-list tr.episode-row[data-episode='"
                             f"{0 if path == native else 17}']").click()
        box = browser.find_element(By.ID, "episode-components")
        assert texts(browser, "#episode-components th") == list(COMPONENTS), label
        assert texts(browser, "#episode-components td") == [
            shown(first["reward_components"][k]) for k in COMPONENTS], label
        assert box.find_elements(By.CSS_SELECTOR, "p.muted") == []
    assert severe(browser) == []
