"""Human review of a package: a self-contained page of sampled items a person marks correct,
ambiguous or wrong, and the import of those verdicts as verification records.

``forge review PACKAGE`` writes ``review.html`` (media embedded, no network). The reviewer marks
each item and saves a verdicts file (JSON); beside each verdict they answer "trivial?" (answerable
at a glance, not worth asking), independent of the verdict. ``forge review --import FILE`` stores
every verdict as a verification record of type ``human`` (requirement HUMAN-1, reviewer, time and
the trivial flag in its diagnostics); items marked wrong or ambiguous are rejected, so the next
``forge build`` diagnoses and repairs them (ambiguous: a new realization; wrong: final rejection).
The package reports the accuracy people found and the share they found trivial, each with a
Wilson 95% interval.
"""

from __future__ import annotations

import base64
import html
import json
import math
import random
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from forge.errors import UsageError
from forge.store import Batch, Store, now
from forge.tracks import item_types

HUMAN_REQUIREMENT = "HUMAN-1"
VERDICTS = ("correct", "ambiguous", "wrong")
VERDICT_FORMAT = "forge-review/1"


class ReviewError(UsageError):
    """A review page or verdicts file that cannot be made or read."""


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion (95% by default)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except OSError as exc:
        raise ReviewError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ReviewError(f"{path}: not JSON lines ({exc})") from None


def sample(package: Path, n: int, seed: int | None = None) -> list[dict[str, Any]]:
    """``n`` items of the package drawn at random (seeded), each with its key."""
    items = _read_jsonl(package / "items.jsonl")
    keys = {r["id"]: r for r in _read_jsonl(package / "answers.jsonl")}
    rng = random.Random(seed if seed is not None else _package_seed(package))
    chosen = rng.sample(items, min(n, len(items)))
    return [{**it, "key": keys.get(it["id"], {})} for it in sorted(chosen, key=lambda r: r["id"])]


def _package_seed(package: Path) -> int:
    try:
        snapshot = json.loads((package / "manifest.json").read_text()).get("store_snapshot", "0")
    except (OSError, ValueError):
        snapshot = "0"
    return int(str(snapshot)[:8] or "0", 16)


def _image_data(package: Path, media: dict[str, Any], store: Store | None) -> str | None:
    """The medium as a data URL: from the package, else from the store's blob of the same hash."""
    path = package / media["path"]
    data = path.read_bytes() if path.exists() else None
    if data is None and store is not None:  # a medium the package only references: its rendered blob
        prefix = Path(media["path"]).stem
        blob = next(iter(sorted((store.root / "blobs" / prefix[:2]).glob(f"{prefix}*"))), None)
        data = blob.read_bytes() if blob else None
    return None if data is None else "data:image/png;base64," + base64.b64encode(data).decode()


def _key_text(it: dict[str, Any]) -> str:
    key = it["key"]
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    qt = it.get("question_type")
    if qt == "numeric":
        return f"{key.get('answer_value'):g}" if key.get("answer_value") is not None else str(key.get("answer"))
    if qt in ("multiple_choice", "ordered_list"):
        return ", ".join(f"{letters[i]} ({it['options'][i]})" for i in key.get("answer_indices") or [])
    if qt == "matching":
        return ", ".join(f"{letters[i]}={j + 1}" for i, j in enumerate(key.get("answer_indices") or []))
    i = key.get("answer_index")
    return f"{letters[i]} ({it['options'][i]})" if i is not None else str(key.get("answer"))


def render_page(package: Path, items: list[dict[str, Any]], store: Store | None = None) -> str:
    """The review page: every sampled item with its media, question, options and key."""
    name = package.name
    cards = []
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    for k, it in enumerate(items):
        media = []
        for m in it.get("media", []):
            src = _image_data(package, m, store)
            media.append(f'<figure><img alt="{html.escape(m.get("label", "image"))}" src="{src}">'
                         f'<figcaption>{html.escape(m.get("label", ""))}</figcaption></figure>' if src else
                         f'<p class="missing">medium {html.escape(m["path"])} is not in the package '
                         f'(rebuild it with the package\'s materialize script)</p>')
        options = "".join(f"<li><b>{letters[i]}</b> {html.escape(o)}</li>" for i, o in enumerate(it.get("options", [])))
        targets = "".join(f"<li><b>{j + 1}</b> {html.escape(t)}</li>" for j, t in enumerate(it.get("targets", [])))
        radios = "".join(f'<label><input type="radio" name="v-{it["id"]}" value="{v}"> {v}</label>' for v in VERDICTS)
        # Trivial is its own question: a correct item can still be one nobody needs to think about.
        trivial = (f'<label class="trivial"><input type="checkbox" name="t-{it["id"]}"> '
                   f'trivial (answerable at a glance)</label>')
        instruction = it.get("instruction")
        cards.append(f"""
<section class="item" id="item-{it['id']}" data-id="{it['id']}">
  <h2>{k + 1}. <span class="meta">{html.escape(it.get('capability', ''))} · {html.escape(it.get('question_type', ''))}
    · {html.escape(it['key'].get('template', ''))} · {it['id'][:12]}</span></h2>
  <div class="media">{''.join(media)}</div>
  {f'<p class="instruction">{html.escape(str(instruction))}</p>' if instruction else ''}
  <p class="question">{html.escape(it.get('question', ''))}</p>
  {'<ol class="options">' + options + '</ol>' if options else ''}
  {'<p>Targets:</p><ol class="targets">' + targets + '</ol>' if targets else ''}
  <p class="key">Key: <b>{html.escape(_key_text(it))}</b></p>
  <div class="verdict">{radios}{trivial}</div>
  <textarea name="note-{it['id']}" placeholder="note (what is wrong or unclear)"></textarea>
</section>""")
    payload = json.dumps({"format": VERDICT_FORMAT, "package": name, "items": [it["id"] for it in items]})
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Review {html.escape(name)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 1em; color: #222; }}
header {{ position: sticky; top: 0; background: #fff; border-bottom: 1px solid #ccc; padding: .5em 0; z-index: 1; }}
.item {{ border: 1px solid #ddd; border-radius: 6px; padding: .8em 1em; margin: 1em 0; }}
.item.done {{ border-color: #6a6; }}
.meta {{ font-weight: normal; color: #666; font-size: .8em; }}
.media {{ display: flex; flex-wrap: wrap; gap: .5em; }}
figure {{ margin: 0; }} img {{ max-width: 100%; border: 1px solid #eee; }}
figcaption {{ font-size: .8em; color: #666; }}
.question {{ font-size: 1.1em; }} .key {{ background: #f4f4d0; padding: .3em .5em; display: inline-block; }}
.instruction {{ color: #444; font-style: italic; }}
.verdict label {{ margin-right: 1.5em; }} .verdict .trivial {{ margin-left: 1.5em; }}
textarea {{ width: 100%; min-height: 2.5em; margin-top: .4em; }}
.missing {{ color: #a00; }}
</style></head>
<body>
<header>
  <b>Review of {html.escape(name)}</b> — {len(items)} items.
  Reviewer: <input id="reviewer" placeholder="your name" required>
  <span id="progress">0 / {len(items)} reviewed</span>
  <button id="save" type="button">Save verdicts</button>
  <a id="download" style="display:none"></a>
</header>
<p>For each item: does the picture show what the question names, and is the key right? Mark it
<b>correct</b>, <b>ambiguous</b> (a careful person could answer otherwise) or <b>wrong</b>, with a note.
Tick <b>trivial</b> too when the item is answerable at a glance and not worth asking, whatever its verdict.
Your marks are kept in this browser until you save them; then run
<code>forge review --import verdicts.json --store STORE</code>.</p>
{''.join(cards)}
<script id="review-data" type="application/json">{html.escape(payload, quote=False)}</script>
<script>
const data = JSON.parse(document.getElementById('review-data').textContent);
const storeKey = 'forge-review:' + data.package;
const trivialBox = id => document.querySelector(`input[name="t-${{id}}"]`);
function collect() {{
  const verdicts = [];
  for (const id of data.items) {{
    const picked = document.querySelector(`input[name="v-${{id}}"]:checked`);
    const note = document.querySelector(`textarea[name="note-${{id}}"]`).value;
    if (picked) verdicts.push({{id: id, verdict: picked.value, trivial: trivialBox(id).checked, note: note}});
  }}
  return verdicts;
}}
function refresh() {{
  const verdicts = collect();
  const done = new Set(verdicts.map(v => v.id));
  for (const id of data.items) document.getElementById('item-' + id).classList.toggle('done', done.has(id));
  document.getElementById('progress').textContent = `${{verdicts.length}} / ${{data.items.length}} reviewed`;
  // Ticks on items not yet given a verdict are kept too, so a reload loses none.
  const trivial = data.items.filter(id => trivialBox(id).checked);
  localStorage.setItem(storeKey, JSON.stringify({{reviewer: document.getElementById('reviewer').value, verdicts,
                                                 trivial}}));
}}
function restore() {{
  const saved = JSON.parse(localStorage.getItem(storeKey) || 'null');
  if (!saved) return;
  document.getElementById('reviewer').value = saved.reviewer || '';
  for (const v of saved.verdicts || []) {{
    const r = document.querySelector(`input[name="v-${{v.id}}"][value="${{v.verdict}}"]`);
    if (r) r.checked = true;
    const t = document.querySelector(`textarea[name="note-${{v.id}}"]`);
    if (t) t.value = v.note || '';
  }}
  for (const id of saved.trivial || []) {{
    const box = trivialBox(id);
    if (box) box.checked = true;
  }}
}}
function save() {{
  const reviewer = document.getElementById('reviewer').value.trim();
  if (!reviewer) {{ alert('Enter your name first.'); return null; }}
  const doc = {{format: data.format, package: data.package, reviewer: reviewer,
               saved_at: new Date().toISOString(), verdicts: collect()}};
  const text = JSON.stringify(doc, null, 1);
  const a = document.getElementById('download');
  a.href = URL.createObjectURL(new Blob([text], {{type: 'application/json'}}));
  a.download = 'verdicts-' + data.package + '.json';
  a.click();
  window.lastSaved = doc;
  return doc;
}}
document.addEventListener('change', refresh);
document.addEventListener('input', refresh);
document.getElementById('save').addEventListener('click', save);
restore(); refresh();
</script>
</body></html>
"""


def write_page(package: Path, out: Path | None, n: int, seed: int | None, store_dir: Path | None) -> Path:
    package = Path(package)
    if not (package / "items.jsonl").exists():
        raise ReviewError(f"{package}: not a package (no items.jsonl)")
    items = sample(package, n, seed)
    store = Store(store_dir, read_only=True) if store_dir else None
    try:
        page = render_page(package, items, store)
    finally:
        if store is not None:
            store.close()
    out = Path(out) if out else package / "review.html"
    out.write_text(page)
    return out


def read_verdicts(path: Path) -> dict[str, Any]:
    """A verdicts file, validated: every problem names the file and the entry at fault."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ReviewError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ReviewError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != VERDICT_FORMAT:
        raise ReviewError(f"{path}: not a forge verdicts file (format {VERDICT_FORMAT!r} expected)")
    if not str(doc.get("reviewer", "")).strip():
        raise ReviewError(f"{path}: field 'reviewer' is empty")
    verdicts = doc.get("verdicts")
    if not isinstance(verdicts, list):
        raise ReviewError(f"{path}: field 'verdicts' must be a list")
    for k, v in enumerate(verdicts):
        if not isinstance(v, dict) or not isinstance(v.get("id"), str):
            raise ReviewError(f"{path}: verdicts[{k}] has no item id")
        if v.get("verdict") not in VERDICTS:
            raise ReviewError(f"{path}: verdicts[{k}] ({v['id'][:12]}): verdict must be one of {list(VERDICTS)}, "
                              f"not {v.get('verdict')!r}")
        # Absent: a file saved before the question existed (trivial unknown); present: a yes or no.
        if "trivial" in v and not isinstance(v["trivial"], bool):
            raise ReviewError(f"{path}: verdicts[{k}] ({v['id'][:12]}): field 'trivial' must be true or false, "
                              f"not {v['trivial']!r}")
    return doc


def import_verdicts(path: Path, store_dir: Path) -> dict[str, Any]:
    """Store each verdict as a human verification record; reject items marked wrong or ambiguous."""
    doc = read_verdicts(path)
    verdicts = doc["verdicts"]
    with Store(store_dir) as store:
        ids = [v["id"] for v in verdicts]
        known = {aid: t for aid, (t, _, _) in store.artifact_statuses(ids).items()}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise ReviewError(f"{path}: {len(unknown)} item(s) not in store {store_dir}, e.g. {unknown[0][:12]} "
                              "(review a package built from this store)")
        released = item_types()
        not_items = [i for i in ids if known[i] not in released]
        if not_items:
            raise ReviewError(f"{path}: {not_items[0][:12]} is a {known[not_items[0]]}, not an item")
        batch = Batch()
        ts = now()
        reviewed_at = str(doc.get("saved_at") or datetime.now(timezone.utc).isoformat())
        for v in verdicts:
            diag = json.dumps({"verdict": v["verdict"], "trivial": v.get("trivial"), "note": v.get("note", ""),
                               "reviewer": doc["reviewer"], "reviewed_at": reviewed_at, "package": doc.get("package")},
                              sort_keys=True)
            batch.add("verifications", (v["id"], HUMAN_REQUIREMENT, "human", "human", "blocking",
                                        v["verdict"] == "correct", f"human:{doc['reviewer']}", diag, ts))
        store.write(batch)
        rejected = [v["id"] for v in verdicts if v["verdict"] != "correct"]
        if rejected:
            store.reject(rejected)
    counts = {k: sum(1 for v in verdicts if v["verdict"] == k) for k in VERDICTS}
    return {"imported": len(verdicts), **counts, "trivial": sum(1 for v in verdicts if v.get("trivial") is True),
            "reviewer": doc["reviewer"], "routed_to_repair": len(rejected), "store": str(store_dir)}


def _trivial_share(latest: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Share of reviewed items people marked trivial, over those where they answered the question
    (files saved before it existed leave it unknown); None where nobody answered it."""
    answered = [r["trivial"] for r in latest if isinstance(r.get("trivial"), bool)]
    if not answered:
        return None
    marked, n = sum(answered), len(answered)
    lo, hi = wilson(marked, n)
    return {"marked": marked, "n": n, "share": round(marked / n, 4), "ci95": [round(lo, 4), round(hi, 4)]}


def review_summary(records: list[dict[str, Any]], released: set[str]) -> dict[str, Any]:
    """Accuracy people found: the latest verdict per item, with a Wilson 95% interval; the same
    over the reviewed items still released; and the share of reviewed items marked trivial."""
    latest: dict[str, dict[str, Any]] = {}
    for r in sorted(records, key=lambda r: (str(r.get("reviewed_at")), r["artifact_id"])):
        latest[r["artifact_id"]] = r
    if not latest:
        return {}
    counts = {k: sum(1 for r in latest.values() if r["verdict"] == k) for k in VERDICTS}
    n = len(latest)
    lo, hi = wilson(counts["correct"], n)
    kept = [r for a, r in latest.items() if a in released]
    kept_ok = sum(1 for r in kept if r["verdict"] == "correct")
    klo, khi = wilson(kept_ok, len(kept))
    trivial = _trivial_share(list(latest.values()))
    return {"reviewed": n, **counts, "accuracy": round(counts["correct"] / n, 4), "ci95": [round(lo, 4), round(hi, 4)],
            "reviewers": sorted({r["reviewer"] for r in latest.values()}),
            "released_reviewed": len(kept), "released_accuracy": round(kept_ok / len(kept), 4) if kept else None,
            "released_ci95": [round(klo, 4), round(khi, 4)] if kept else None,
            # Only where someone answered it, so summaries of earlier reviews keep their form.
            **({"trivial": trivial} if trivial else {})}
