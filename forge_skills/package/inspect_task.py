"""This package as an inspect_ai task.

    inspect eval task.py --model openai/gpt-4o          (or any provider inspect_ai knows)

Each sample is asked exactly as ``forge eval`` asks it (the same system message, item text and
images), and the reply is read and scored by the package's own scorer, so the accuracy inspect
reports is the one ``forge eval`` reports for the same replies. Needs ``inspect_ai``; the rest is
the package's own standard-library modules.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ContentImage, ContentText
from inspect_ai.scorer import Score, Target, accuracy, scorer, stderr
from inspect_ai.solver import TaskState, generate

HERE = Path(__file__).resolve().parent
MODULE = "__MODULE__"  # the package's scorer module, filled in when the package is written


def _load(name: str):
    """A module of the package (score, prompt) loaded from its folder, without writing bytecode."""
    path = HERE / MODULE / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"_{MODULE}_{name}", path)
    module = importlib.util.module_from_spec(spec)
    writes, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = writes
    return module


score_module = _load("score")
prompt_module = _load("prompt")


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (HERE / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _sample(item: dict) -> Sample:
    content = [ContentText(text=prompt_module.item_text(item))]
    content += [ContentImage(image=str(HERE / m["path"])) for m in item.get("media") or []]
    return Sample(id=item["id"], input=[ChatMessageSystem(content=prompt_module.SYSTEM), ChatMessageUser(content=content)],
                  target=item["id"], metadata={"capability": item.get("capability"),
                                               "question_type": item.get("question_type")})


@scorer(metrics=[accuracy(), stderr()])
def package_scorer():
    keys = {row["id"]: row for row in _rows("answers.jsonl")}

    async def score(state: TaskState, target: Target) -> Score:
        key = keys[target.text]
        reply = state.output.completion if state.output else ""
        reading, _ = prompt_module.read_reply(reply, lambda text: score_module.parse(key, text))
        value = float(score_module.score_item(key, reading)) if reading is not None else 0.0
        return Score(value=value, answer=reading, explanation=None if reading is not None else "invalid response")

    return score


@task
def benchmark() -> Task:
    return Task(dataset=MemoryDataset([_sample(it) for it in _rows("items.jsonl")], name=MODULE),
                solver=generate(), scorer=package_scorer())
