"""Executable OE scorer, shipped inside every package as ``<package>/score.py``.

Standard library only, so a package can be scored without forge::

    python -m <package>.score predictions.jsonl [--answers answers.jsonl] [--json]

``predictions.jsonl`` holds one ``{"id": ..., "response": ...}`` per line. A missing or
unparsable response scores 0 and stays in the denominator.

Protocols other than the built-in ones are modules beside this file, ``protocols/<name>.py``,
each with ``parse(key, response)`` (None when invalid) and ``score(key, response) -> float``;
a package ships the ones its items use.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import math
import re
import string
import sys
from pathlib import Path

LETTERS = string.ascii_uppercase


_PREFIX = re.compile(r"^(answer|option)\s*[:\-]?\s*")
_WRAPPED = re.compile(r"[(\[](.*)[)\]]")


def normalize(text: object) -> str:
    return _normalize(str(text))


@functools.lru_cache(maxsize=1 << 16)  # scoring a file reads the same options and letters again and again
def _normalize(text: str) -> str:
    s = _PREFIX.sub("", text.strip().lower(), count=1).strip().rstrip(".").strip()
    wrapped = _WRAPPED.fullmatch(s)
    return (wrapped.group(1) if wrapped else s).strip()


def parse_choice(response: object, options: list[str]) -> int | None:
    """Index of the chosen option: by letter (``B``, ``(b)``) or by exact option text."""
    if response is None:
        return None
    s = normalize(response)
    lowered = [_normalize(str(o)) for o in options]
    if s in lowered:
        return lowered.index(s)
    if len(s) == 1 and s.upper() in LETTERS[: len(options)]:
        return LETTERS.index(s.upper())
    return None


def parse_choice_list(response: object, options: list[str]) -> list[int] | None:
    """Several options: letters or option texts separated by commas, 'and', '>' or spaces."""
    if response is None:
        return None
    if isinstance(response, (list, tuple)):
        parts = [str(p) for p in response]
    else:
        text = str(response).strip()
        parts = re.split(r"\s*(?:,|;|>|\band\b|\bthen\b)\s*", text)
        if len(parts) == 1 and re.fullmatch(r"(?:[A-Za-z]\s+)+[A-Za-z]", text):
            parts = text.split()
    out = []
    for p in parts:
        if not p.strip():
            continue
        idx = parse_choice(p, options)
        if idx is None or idx in out:
            return None
        out.append(idx)
    return out or None


def parse_number(response: object) -> float | None:
    if response is None:
        return None
    if isinstance(response, (int, float)):
        return float(response)
    m = re.search(r"[-+]?\d+(?:\.\d+)?", str(response))
    return float(m.group(0)) if m else None


def kendall_tau(order: list[int], truth: list[int]) -> float:
    """Rank agreement of two orderings of the same items, in [-1, 1]."""
    pos = {v: i for i, v in enumerate(order)}
    n = len(truth)
    if n < 2 or set(order) != set(truth):
        return -1.0
    concordant = discordant = 0
    for i in range(n):
        for j in range(i + 1, n):
            if pos[truth[i]] < pos[truth[j]]:
                concordant += 1
            else:
                discordant += 1
    return (concordant - discordant) / (n * (n - 1) / 2)


def parse_matching(response: object, options: list[str], targets: list[str]) -> list[int] | None:
    """One target per option: ``A=2, B=1`` / ``A: Frame 2; B: Frame 1`` or a list of target
    numbers in option order. Every option must be matched exactly once."""
    if response is None or not targets:
        return None
    if isinstance(response, (list, tuple)):
        pairs = [(LETTERS[i], str(v)) for i, v in enumerate(response)]
    else:
        pairs = re.findall(r"([A-Za-z])\s*(?:=|:|->|-)\s*([^,;\n]+)", str(response))
    lowered = [normalize(t) for t in targets]
    got: dict[int, int] = {}
    for letter, target in pairs:
        i = LETTERS.find(letter.upper())
        t = normalize(target)
        if t in lowered:
            j = lowered.index(t)
        elif re.fullmatch(r"\d+", t) and 1 <= int(t) <= len(targets):
            j = int(t) - 1
        else:
            return None
        if not 0 <= i < len(options) or i in got:
            return None
        got[i] = j
    if len(got) != len(options):
        return None
    return [got[i] for i in range(len(options))]


BUILTIN_PROTOCOLS = ("exact_choice", "yes_no", "set_match", "ordered_list", "interval", "numeric", "matching")
# Where other protocols come from: a function of the name returning a module (set where the
# scorer runs inside a tool that knows more protocols), else ``protocols/<name>.py`` beside this file.
PROTOCOL_FINDER = None
_LOADED: dict = {}


def protocol_module(name: str):
    """The module of a protocol that is not built in, or None when none is found."""
    if name in _LOADED:
        return _LOADED[name]
    module = PROTOCOL_FINDER(name) if PROTOCOL_FINDER is not None else None
    path = Path(__file__).resolve().parent / "protocols" / f"{name}.py"
    if module is None and re.fullmatch(r"[a-z][a-z0-9_]*", name or "") and path.is_file():
        spec = importlib.util.spec_from_file_location(f"protocol_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    _LOADED[name] = module
    return module


def knows_protocol(name: object) -> bool:
    return isinstance(name, str) and (name in BUILTIN_PROTOCOLS or protocol_module(name) is not None)


def parse(key: dict, response: object):
    """The response as the protocol reads it, or None when it is invalid."""
    protocol = key["scoring"]["protocol"]
    if protocol not in BUILTIN_PROTOCOLS:
        module = protocol_module(protocol)
        if module is None:
            raise ValueError(f"unknown scoring protocol {protocol!r}")
        return module.parse(key, response)
    options = key.get("options", [])
    if protocol in ("exact_choice", "yes_no"):
        return parse_choice(response, options)
    if protocol in ("set_match", "ordered_list"):
        return parse_choice_list(response, options)
    if protocol == "interval":
        idx = parse_choice(response, options)
        if idx is not None:
            return idx
        x = parse_number(response)
        if x is None:
            return None
        for i, (lo, hi) in enumerate(key["scoring"]["intervals"]):
            if lo <= x <= hi:
                return i
        return None
    if protocol == "numeric":
        return parse_number(response)
    if protocol == "matching":
        return parse_matching(response, options, key.get("targets") or [])
    raise ValueError(f"unknown scoring protocol {protocol!r}")


def score_item(key: dict, response: object) -> float:
    """1.0 for a correct response, 0.0 otherwise; invalid responses score 0."""
    protocol = key["scoring"]["protocol"]
    if protocol not in BUILTIN_PROTOCOLS:
        module = protocol_module(protocol)
        if module is None:
            raise ValueError(f"unknown scoring protocol {protocol!r}")
        return float(module.score(key, response))
    got = parse(key, response)
    if got is None:
        return 0.0
    if protocol in ("exact_choice", "yes_no", "interval"):
        return 1.0 if got == key["answer_index"] else 0.0
    if protocol == "set_match":
        return 1.0 if set(got) == set(key["answer_indices"]) else 0.0
    if protocol in ("ordered_list", "matching"):
        return 1.0 if list(got) == list(key["answer_indices"]) else 0.0
    truth = float(key["answer_value"])
    tol = max(float(key["scoring"].get("abs_tol", 0.0)), float(key["scoring"].get("rel_tol", 0.0)) * abs(truth))
    return 1.0 if abs(got - truth) <= tol + 1e-9 else 0.0


def secondary(key: dict, response: object) -> dict:
    """Metrics reported beside the score: Kendall tau for orderings, the share of correct pairs
    for matchings, and whatever a protocol module's own ``secondary(key, response)`` gives (a
    relative error, a rotation error). Each is averaged over the items reporting it."""
    protocol = key["scoring"]["protocol"]
    if protocol not in BUILTIN_PROTOCOLS:
        own = getattr(protocol_module(protocol), "secondary", None)
        return dict(own(key, response)) if own is not None else {}
    if protocol not in ("matching", "ordered_list"):
        return {}
    got = parse(key, response)
    if protocol == "matching":
        truth = key["answer_indices"]
        return {"pairs_correct": sum(a == b for a, b in zip(got, truth)) / len(truth) if got else 0.0}
    if protocol != "ordered_list":
        return {}
    return {"kendall_tau": kendall_tau(got, key["answer_indices"]) if got else -1.0}


def score_all(answers: dict[str, dict], predictions: dict[str, object]) -> dict:
    per_item = {iid: score_item(key, predictions.get(iid)) for iid, key in answers.items()}
    groups: dict[str, dict[str, list[float]]] = {"capability": {}, "question_type": {}, "template": {}}
    for iid, s in per_item.items():
        for g in groups:
            groups[g].setdefault(answers[iid].get(g, "?"), []).append(s)
    metrics: dict[str, list[float]] = {}
    for iid, key in answers.items():
        for name, value in secondary(key, predictions.get(iid)).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                metrics.setdefault(name, []).append(float(value))
    n = len(per_item)
    return {
        "items": n,
        "answered": sum(1 for iid in answers if iid in predictions),
        "invalid": sum(1 for iid, key in answers.items() if iid in predictions and parse(key, predictions[iid]) is None),
        "accuracy": (sum(per_item.values()) / n) if n else 0.0,
        **{f"mean_{name}": sum(v) / len(v) for name, v in sorted(metrics.items())},
        **({"metric_items": {name: len(v) for name, v in sorted(metrics.items())}} if metrics else {}),
        **{f"by_{g}": {k: sum(v) / len(v) for k, v in sorted(d.items())} for g, d in groups.items()},
        "per_item": per_item,
    }


class ScoreInputError(Exception):
    """A predictions or answers file that cannot be read as this scorer expects."""


def read_jsonl(path: Path, what: str = "file") -> list[dict]:
    """Rows of a JSON-lines file; every problem names the file and the line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except FileNotFoundError:
        raise ScoreInputError(f"{path}: no such {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScoreInputError(f"{path}: cannot read the {what} ({exc})") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ScoreInputError(f"{path}:{number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise ScoreInputError(f"{path}:{number}: expected an object with a string \"id\"")
        rows.append(row)
    return rows


def read_predictions(path: Path) -> dict[str, object]:
    predictions: dict[str, object] = {}
    for number, row in enumerate(read_jsonl(path, "predictions file"), 1):
        if row["id"] in predictions:
            raise ScoreInputError(f"{path}: item {row['id']} is answered twice (the second at row {number})")
        predictions[row["id"]] = row.get("response")
    return predictions


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description="Score predictions against this package's answer key.")
    ap.add_argument("predictions", type=Path)
    ap.add_argument("--answers", type=Path, default=here / "answers.jsonl")
    ap.add_argument("--json", action="store_true", help="print the full result as JSON")
    args = ap.parse_args(argv)
    try:
        answers = {row["id"]: row for row in read_jsonl(args.answers, "answer key")}
        predictions = read_predictions(args.predictions)
    except ScoreInputError as exc:
        print(f"score: error: {exc}", file=sys.stderr)
        return 2
    # Ids the key does not know are not scored, but said: a prediction file for another
    # package (or another version of this one) would otherwise score 0 without a word.
    unknown = sorted(set(predictions) - set(answers))
    result = score_all(answers, predictions)
    result["unknown_ids"] = len(unknown)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        print(f"items {result['items']}  answered {result['answered']}  invalid {result['invalid']}  "
              f"accuracy {result['accuracy']:.4f}")
        for name, count in result.get("metric_items", {}).items():
            print(f"  mean {name} {result[f'mean_{name}']:.4f} over {count} items")
        for cap, acc in result["by_capability"].items():
            print(f"  {cap:<24} {acc:.4f}")
    if unknown:
        print(f"score: warning: {len(unknown)} prediction(s) name ids that are not in {args.answers} "
              f"(not scored), e.g. {', '.join(unknown[:3])}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
