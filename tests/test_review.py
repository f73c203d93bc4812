"""Human review: the page works in a real browser (headless Chromium), verdicts saved from it are
stored as human verification records, and the next build repairs or removes the items people
rejected and reports the accuracy they found."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forge.errors import ForgeError
from forge.review import import_verdicts, read_verdicts, wilson, write_page
from forge.store import Store

from conftest import run_build, write_intent
from tests.browser import headless_chromium

# The module's tests read one module build: they run in one worker, which builds it once.
pytestmark = pytest.mark.xdist_group("review")


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory):
    root = tmp_path_factory.mktemp("review")
    intent = write_intent(root, "review.yaml")
    summary = run_build(intent, root / "store", root / "out")
    return {"root": root, "intent": intent, "summary": summary, "package": Path(summary["package_path"])}


def test_review_page_in_a_real_browser(reviewed, tmp_path):
    from selenium.webdriver.common.by import By

    page = write_page(reviewed["package"], tmp_path / "review.html", 8, seed=3, store_dir=None)
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    driver = headless_chromium(downloads=downloads)
    try:
        driver.get(page.as_uri())
        cards = driver.find_elements(By.CSS_SELECTOR, "section.item")
        assert len(cards) == 8
        images = driver.execute_script(
            "return [...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]);")
        assert images and all(done and w > 0 and h > 0 for done, w, h in images), images
        driver.find_element(By.ID, "reviewer").send_keys("Ada")
        ids = [c.get_attribute("data-id") for c in cards]
        verdicts = ["wrong", "ambiguous"] + ["correct"] * 6
        for iid, verdict in zip(ids, verdicts):
            driver.find_element(By.CSS_SELECTOR, f'input[name="v-{iid}"][value="{verdict}"]').click()
        driver.find_element(By.CSS_SELECTOR, f'textarea[name="note-{ids[0]}"]').send_keys("the key names another object")
        assert driver.find_element(By.ID, "progress").text == "8 / 8 reviewed"
        driver.find_element(By.ID, "save").click()
        saved = driver.execute_script("return window.lastSaved;")
        # The page keeps the marks: a reload restores them.
        driver.refresh()
        assert driver.find_element(By.ID, "progress").text == "8 / 8 reviewed"
    finally:
        driver.quit()
    assert saved["reviewer"] == "Ada" and [v["verdict"] for v in saved["verdicts"]] == verdicts
    assert saved["verdicts"][0]["note"] == "the key names another object"
    files = list(downloads.glob("verdicts-*.json"))
    if files:  # the download itself, where the browser wrote it
        assert json.loads(files[0].read_text())["verdicts"] == saved["verdicts"]
    out = tmp_path / "verdicts.json"
    out.write_text(json.dumps(saved))
    assert read_verdicts(out)["reviewer"] == "Ada"


def test_verdicts_become_records_and_drive_repair(reviewed, tmp_path):
    pkg = reviewed["package"]
    keys = [json.loads(x) for x in open(pkg / "answers.jsonl")]
    ids = sorted(k["id"] for k in keys)[:10]
    wrong, ambiguous = ids[0], ids[1]
    verdicts = [{"id": wrong, "verdict": "wrong", "note": "key contradicts the picture"},
                {"id": ambiguous, "verdict": "ambiguous", "note": "two objects could be meant"}] + \
               [{"id": i, "verdict": "correct", "note": ""} for i in ids[2:]]
    doc = {"format": "forge-review/1", "package": pkg.name, "reviewer": "Ada", "saved_at": "2026-12-01T10:00:00Z",
           "verdicts": verdicts}
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps(doc))
    store_dir = reviewed["root"] / "store"
    result = import_verdicts(path, store_dir)
    assert (result["correct"], result["ambiguous"], result["wrong"], result["routed_to_repair"]) == (8, 1, 1, 2)
    with Store(store_dir, read_only=True) as s:
        rows = s.execute("SELECT artifact_id, passed, backend, diagnostics FROM verifications WHERE verification = "
                         "'human' ORDER BY artifact_id").fetchall()
        assert len(rows) == 10 and all(b == "human:Ada" for _, _, b, _ in rows)
        assert {a for a, ok, _, _ in rows if not ok} == {wrong, ambiguous}
        assert json.loads(dict((a, d) for a, _, _, d in rows)[wrong])["reviewer"] == "Ada"
    again = run_build(reviewed["intent"], store_dir, reviewed["root"] / "out")
    with Store(store_dir, read_only=True) as s:
        diags = {a: (c, o) for a, c, o in s.execute(
            "SELECT artifact_id, category, operator FROM diagnoses WHERE build_id = ?", [again["build_id"]]).fetchall()}
    assert diags[wrong] == ("human_wrong", "final_rejection")
    assert diags[ambiguous] == ("human_ambiguous", "candidate_resynthesis")
    released = {json.loads(x)["id"] for x in open(Path(again["package_path"]) / "answers.jsonl")}
    assert wrong not in released and ambiguous not in released
    comp = json.loads((Path(again["package_path"]) / "composition.json").read_text())
    review = comp["human_review"]
    assert (review["reviewed"], review["correct"], review["wrong"], review["ambiguous"]) == (10, 8, 1, 1)
    lo, hi = wilson(8, 10)
    assert review["ci95"] == [round(lo, 4), round(hi, 4)] and lo < 0.8 < hi
    assert review["released_reviewed"] == 8 and review["released_accuracy"] == 1.0
    assert "Human review: 8 of 10" in (Path(again["package_path"]) / "README.md").read_text()
    manifest = json.loads((Path(again["package_path"]) / "manifest.json").read_text())
    assert manifest["human_review"]["accuracy"] == 0.8


def test_bad_verdict_files_are_clear_errors(reviewed, tmp_path):
    store_dir = reviewed["root"] / "store"
    bad = tmp_path / "bad.json"
    for text, message in [("{", "not JSON"), ('{"format": "x"}', "not a forge verdicts file"),
                          ('{"format": "forge-review/1", "reviewer": "", "verdicts": []}', "'reviewer' is empty"),
                          ('{"format": "forge-review/1", "reviewer": "A", "verdicts": [{"id": "abc", "verdict": "meh"}]}',
                           r"verdicts\[0\].*must be one of"),
                          ('{"format": "forge-review/1", "reviewer": "A", "verdicts": [{"id": "f00", "verdict": "wrong"}]}',
                           "not in store")]:
        bad.write_text(text)
        with pytest.raises(ForgeError, match=message):
            import_verdicts(bad, store_dir)
    done = subprocess.run([sys.executable, "-m", "forge.cli", "review", "--import", str(bad)], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "needs --store" in done.stderr and "Traceback" not in done.stderr
