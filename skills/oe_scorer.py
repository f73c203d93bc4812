"""Executable OE scorer, shipped inside every package as ``<package>/score.py``.

Standard library only, so a package can be scored without forge::

    python -m <package>.score predictions.jsonl [--answers answers.jsonl] [--json]

``predictions.jsonl`` holds one ``{"id": ..., "response": ...}`` per line. A missing or
unparsable response scores 0 and stays in the denominator.
"""

from __future__ import annotations

import argparse
import json
import re
import string
import sys
from pathlib import Path

LETTERS = string.ascii_uppercase


def normalize(text: object) -> str:
    s = str(text).strip().lower()
    s = re.sub(r"^(answer|option)\s*[:\-]?\s*", "", s).strip().rstrip(".").strip()
    wrapped = re.fullmatch(r"[(\[](.*)[)\]]", s)
    return (wrapped.group(1) if wrapped else s).strip()


def parse_choice(response: object, options: list[str]) -> int | None:
    """Index of the chosen option: by letter (``B``, ``(b)``) or by exact option text."""
    if response is None:
        return None
    s = normalize(response)
    lowered = [normalize(o) for o in options]
    if s in lowered:
        return lowered.index(s)
    if len(s) == 1 and s.upper() in LETTERS[: len(options)]:
        return LETTERS.index(s.upper())
    return None


def score_item(key: dict, response: object) -> float:
    """1.0 or 0.0 for the choice protocols; invalid responses score 0."""
    protocol = key["scoring"]["protocol"]
    options = key["options"]
    if protocol in ("exact_choice", "yes_no"):
        choice = parse_choice(response, options)
        return 1.0 if choice is not None and choice == key["answer_index"] else 0.0
    raise ValueError(f"unknown scoring protocol {protocol!r}")


def score_all(answers: dict[str, dict], predictions: dict[str, object]) -> dict:
    per_item = {iid: score_item(key, predictions.get(iid)) for iid, key in answers.items()}
    groups: dict[str, dict[str, list[float]]] = {"capability": {}, "question_type": {}, "template": {}}
    for iid, s in per_item.items():
        for g in groups:
            groups[g].setdefault(answers[iid].get(g, "?"), []).append(s)
    n = len(per_item)
    return {
        "items": n,
        "answered": sum(1 for iid in answers if iid in predictions),
        "invalid": sum(1 for iid, key in answers.items()
                       if iid in predictions and parse_choice(predictions[iid], key["options"]) is None),
        "accuracy": (sum(per_item.values()) / n) if n else 0.0,
        **{f"by_{g}": {k: sum(v) / len(v) for k, v in sorted(d.items())} for g, d in groups.items()},
        "per_item": per_item,
    }


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description="Score predictions against this package's answer key.")
    ap.add_argument("predictions", type=Path)
    ap.add_argument("--answers", type=Path, default=here / "answers.jsonl")
    ap.add_argument("--json", action="store_true", help="print the full result as JSON")
    args = ap.parse_args(argv)
    answers = {row["id"]: row for row in read_jsonl(args.answers)}
    predictions = {}
    for row in read_jsonl(args.predictions):
        predictions[row["id"]] = row.get("response")
    result = score_all(answers, predictions)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(f"items {result['items']}  answered {result['answered']}  invalid {result['invalid']}  "
              f"accuracy {result['accuracy']:.4f}")
        for cap, acc in result["by_capability"].items():
            print(f"  {cap:<24} {acc:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
