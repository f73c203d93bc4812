"""The store's private methods stay private: every other module goes through its public query API."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRIVATE = {"_ids_query"}


def test_no_module_outside_the_store_calls_its_private_queries():
    offenders = []
    for folder in ("forge", "skills", "resources", "benchmarks", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "forge" / "store.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders
