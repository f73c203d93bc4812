"""Files that let a package run in the evaluation tools people already use.

- ``task.py``: an inspect_ai task (``inspect eval task.py --model ...``) asking and scoring as
  ``forge eval`` does, with the package's ``prompt.py`` and ``score.py``;
- ``data/test.parquet``: the items as a Hugging Face ``datasets`` split (media referenced by
  their paths in the package; the card's YAML header names the split, so
  ``load_dataset(PACKAGE)`` finds it);
- ``openeqa.json``: OpenEQA-style records for the items whose answer is free-form text (one
  option's words, or a number), keyed as OpenEQA's own files are.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

PARQUET_FILE = "data/test.parquet"
OPENEQA_FILE = "openeqa.json"
TASK_FILE = "task.py"
# Protocols whose answer reads as free text: one option's words, or a number.
FREE_FORM = ("exact_choice", "yes_no", "interval", "numeric")


def inspect_task(module: str) -> bytes:
    text = (Path(__file__).parent / "inspect_task.py").read_text(encoding="utf-8")
    return text.replace('MODULE = "__MODULE__"', f'MODULE = "{module}"').encode()


def prompt_module() -> bytes:
    """The prompt and reply reading of ``forge eval`` (standard library only)."""
    import forge.evaluation.prompt as prompt

    return Path(prompt.__file__).read_bytes()


def parquet_columns(items: list[dict[str, Any]], keys: dict[str, dict[str, Any]]) -> dict[str, list[Any]]:
    """The split's columns: what a model sees, the answer, and the media paths in the package."""
    def key(i: str) -> dict[str, Any]:
        return keys[i]

    return {
        "id": [it["id"] for it in items],
        "capability": [it.get("capability") for it in items],
        "question_type": [it.get("question_type") for it in items],
        "question": [it.get("question") for it in items],
        "instruction": [it.get("instruction") or "" for it in items],
        "options": [list(it.get("options") or []) for it in items],
        "targets": [list(it.get("targets") or []) for it in items],
        "response_format": [it.get("response_format") for it in items],
        "images": [[m["path"] for m in it.get("media") or []] for it in items],
        "image_labels": [[m.get("label") or m.get("role") or "" for m in it.get("media") or []] for it in items],
        "answer": [str(key(it["id"]).get("answer")) for it in items],
        "answer_index": [key(it["id"]).get("answer_index") for it in items],
        "answer_indices": [key(it["id"]).get("answer_indices") for it in items],
        "answer_value": [key(it["id"]).get("answer_value") for it in items],
        "scoring": [json.dumps(key(it["id"]).get("scoring"), sort_keys=True) for it in items],
    }


def parquet(items: list[dict[str, Any]], keys: dict[str, dict[str, Any]]) -> bytes:
    """One row per item (``parquet_columns``) as a Parquet file."""
    columns = parquet_columns(items, keys)
    schema = pa.schema([("id", pa.string()), ("capability", pa.string()), ("question_type", pa.string()),
                        ("question", pa.string()), ("instruction", pa.string()), ("options", pa.list_(pa.string())),
                        ("targets", pa.list_(pa.string())), ("response_format", pa.string()),
                        ("images", pa.list_(pa.string())), ("image_labels", pa.list_(pa.string())),
                        ("answer", pa.string()), ("answer_index", pa.int64()),
                        ("answer_indices", pa.list_(pa.int64())), ("answer_value", pa.float64()),
                        ("scoring", pa.string())])
    table = pa.Table.from_pydict(columns, schema=schema)
    out = io.BytesIO()
    pq.write_table(table, out, compression="zstd")  # no timestamps in the file: same items, same bytes
    return out.getvalue()


def openeqa_records(items: list[dict[str, Any]], keys: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The OpenEQA-style records of the items whose answer is free-form text."""
    rows = []
    for it in items:
        key = keys[it["id"]]
        if (key.get("scoring") or {}).get("protocol") not in FREE_FORM:
            continue
        media = [m["path"] for m in it.get("media") or []]
        # OpenEQA records hold one question text: the stated conventions lead it.
        question = " ".join(t for t in (it.get("instruction"), it.get("question")) if t)
        rows.append({"question_id": it["id"], "category": it.get("capability"), "question": question,
                     "answer": str(key.get("answer")), "episode_history": media[0].rsplit("/", 1)[0] if media else "",
                     "frames": media})
    return rows


def openeqa(records: list[dict[str, Any]]) -> bytes:
    """``openeqa.json``: :func:`openeqa_records` as a JSON array, a record per line (written by
    the C encoder; an indented file goes through the pure-Python one, four times slower)."""
    if not records:
        return b"[]\n"
    return ("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in records) + "\n]\n").encode()


def dataset_card_header(name: str) -> str:
    """The YAML header of the package README that ``datasets.load_dataset`` reads."""
    return ("---\n"
            f"pretty_name: {name}\n"
            "configs:\n"
            "- config_name: default\n"
            "  data_files:\n"
            "  - split: test\n"
            f"    path: {PARQUET_FILE}\n"
            "---\n\n")
