"""Human review: the page works in a real browser (headless Chromium), verdicts saved from it are
stored as human verification records, and the next build repairs or removes the items people
rejected and reports the accuracy they found."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from forge.errors import ForgeError
from forge.review import import_verdicts, read_verdicts, render_page, review_summary, sample, wilson, write_page
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
        # Trivial is independent of the verdict: a wrong item and a correct one are ticked.
        trivial = [False] * 8
        for k in (0, 3):
            box = driver.find_element(By.CSS_SELECTOR, f'input[type="checkbox"][name="t-{ids[k]}"]')
            # Back up the page, the box would sit under the sticky header: centre it first.
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", box)
            box.click()
            trivial[k] = True
        driver.find_element(By.CSS_SELECTOR, f'textarea[name="note-{ids[0]}"]').send_keys("the key names another object")
        assert driver.find_element(By.ID, "progress").text == "8 / 8 reviewed"
        driver.find_element(By.ID, "save").click()
        saved = driver.execute_script("return window.lastSaved;")
        # The page keeps the marks: a reload restores them.
        driver.refresh()
        assert driver.find_element(By.ID, "progress").text == "8 / 8 reviewed"
        assert [driver.find_element(By.CSS_SELECTOR, f'input[name="t-{i}"]').is_selected() for i in ids] == trivial
    finally:
        driver.quit()
    assert saved["reviewer"] == "Ada" and [v["verdict"] for v in saved["verdicts"]] == verdicts
    assert [v["trivial"] for v in saved["verdicts"]] == trivial
    assert saved["verdicts"][0]["note"] == "the key names another object"
    files = list(downloads.glob("verdicts-*.json"))
    if files:  # the download itself, where the browser wrote it
        assert json.loads(files[0].read_text())["verdicts"] == saved["verdicts"]
    out = tmp_path / "verdicts.json"
    out.write_text(json.dumps(saved))
    assert read_verdicts(out)["reviewer"] == "Ada"


def test_page_asks_trivial_per_item_and_shows_instructions(reviewed):
    # Packages may carry instructions already: only the first item has one here.
    items = [{k: v for k, v in it.items() if k != "instruction"} for it in sample(reviewed["package"], 4, seed=1)]
    items[0] = {**items[0], "instruction": "Left & right are as the camera sees them."}
    page = render_page(reviewed["package"], items)
    for it in items:
        assert page.count(f'<input type="checkbox" name="t-{it["id"]}">') == 1
    assert page.count("trivial (answerable at a glance)") == 4
    # The instruction stands above its own item's question, escaped; items without one show none.
    first = page[page.index(f'id="item-{items[0]["id"]}"'):page.index(f'id="item-{items[1]["id"]}"')]
    shown = '<p class="instruction">Left &amp; right are as the camera sees them.</p>'
    assert shown in first and first.index(shown) < first.index('<p class="question">')
    assert page.count('<p class="instruction">') == 1


def test_trivial_flags_are_stored_and_summarized(reviewed, tmp_path):
    # A private copy of the store: these verdicts must not change what the other tests count.
    store_dir = tmp_path / "store"
    shutil.copytree(reviewed["root"] / "store", store_dir)
    ids = sorted(json.loads(x)["id"] for x in open(reviewed["package"] / "answers.jsonl"))[:6]
    # Five answered the trivial question (two yes, one of them on a wrong item); the sixth comes
    # from a file saved before the question existed: unknown, so outside the share.
    flags = [True, True, False, False, False]
    verdicts = [{"id": i, "verdict": "wrong" if k == 1 else "correct", "trivial": t, "note": ""}
                for k, (i, t) in enumerate(zip(ids, flags))] + [{"id": ids[5], "verdict": "correct", "note": ""}]
    path = tmp_path / "verdicts.json"
    path.write_text(json.dumps({"format": "forge-review/1", "package": reviewed["package"].name, "reviewer": "Bo",
                                "saved_at": "2026-12-02T09:00:00Z", "verdicts": verdicts}))
    done = subprocess.run([sys.executable, "-m", "forge.cli", "review", "--import", str(path), "--store",
                           str(store_dir)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "6 verdicts by Bo: 5 correct, 0 ambiguous, 1 wrong, 2 marked trivial" in done.stdout
    with Store(store_dir, read_only=True) as s:
        rows = s.execute("SELECT artifact_id, diagnostics FROM verifications WHERE verification = "
                         "'human'").fetchall()
    records = [{"artifact_id": a, **json.loads(d)} for a, d in rows if json.loads(d)["reviewer"] == "Bo"]
    assert {r["artifact_id"]: r["trivial"] for r in records} == {**dict(zip(ids, flags)), ids[5]: None}
    review = review_summary(records, set(ids))
    assert (review["reviewed"], review["correct"], review["wrong"]) == (6, 5, 1)
    # 2 trivial of 5 answered: share 0.4, Wilson 95% interval (0.1176, 0.7693) by hand.
    assert review["trivial"] == {"marked": 2, "n": 5, "share": 0.4, "ci95": [0.1176, 0.7693]}
    # Reviews from before the question (no flag anywhere) keep the summary they had.
    assert "trivial" not in review_summary([{**r, "trivial": None} for r in records], set(ids))


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
                          ('{"format": "forge-review/1", "reviewer": "A", "verdicts": [{"id": "abc123", '
                           '"verdict": "correct", "trivial": "yes"}]}',
                           r"bad\.json: verdicts\[0\] \(abc123\): field 'trivial' must be true or false, not 'yes'"),
                          ('{"format": "forge-review/1", "reviewer": "A", "verdicts": [{"id": "f00", "verdict": "wrong"}]}',
                           "not in store")]:
        bad.write_text(text)
        with pytest.raises(ForgeError, match=message):
            import_verdicts(bad, store_dir)
    done = subprocess.run([sys.executable, "-m", "forge.cli", "review", "--import", str(bad)], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "needs --store" in done.stderr and "Traceback" not in done.stderr
