"""A released package as an evaluation reads it: its manifest, the items a model sees, the answer
key, the media files, and the package's own scorer module.

The scorer is the one shipped in the package (``<module>/score.py``, standard library only, with
its ``protocols/`` beside it), loaded from the package folder under a private module name, so
two packages (or two versions of one) never share a loaded scorer, and without writing bytecode
into the released folder.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import re
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

from forge.errors import UsageError

SCORER_FUNCTIONS = ("parse", "score_item")  # what the evaluation needs of a package scorer


@dataclass
class EvalPackage:
    """A package folder, read for evaluation (the files are not changed)."""

    path: Path
    manifest: dict[str, Any]
    digest: str  # SHA-256 of manifest.json, which lists the checksum of every released file
    items: list[dict[str, Any]]  # items.jsonl rows, in file order: what a model sees
    keys: dict[str, dict[str, Any]]  # answers.jsonl rows by item id: the hidden key
    scorer: ModuleType
    composition: dict[str, Any] = field(default_factory=dict)
    # What evaluating the package computes once: scores and readings by (item id, response) (a
    # package's scorer is a function of the key and the response, and a panel gives the same
    # response to one item many times over), the items as solvers see them, the solvers' memo.
    memo: dict[tuple[str, ...], Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        return str(self.manifest.get("name", self.path.name))

    @property
    def version(self) -> str:
        return str(self.manifest.get("version", "?"))

    @functools.cached_property
    def label(self) -> str:
        return f"{self.name}-{self.version}"

    def media(self, item: dict[str, Any]) -> list[bytes]:
        """The item's media files, in the order the item lists them."""
        out = []
        for m in item.get("media") or []:
            rel = m.get("path") if isinstance(m, dict) else None
            if not isinstance(rel, str):
                raise UsageError(f"{self.path / 'items.jsonl'}: item {item['id']} lists a media entry without a path")
            path = (self.path / rel).resolve()
            if self.path.resolve() not in path.parents:
                raise UsageError(f"{self.path}: item {item['id']} names media outside the package: {rel}")
            try:
                out.append(path.read_bytes())
            except FileNotFoundError:
                hint = None
                if isinstance(m, dict) and m.get("recipe") is not None:
                    hint = (f"this package references media it may not redistribute; rebuild them first with "
                            f"`python -m {self.module}.materialize --data-root DIR` in {self.path}")
                raise UsageError(f"{path}: media of item {item['id']} is missing", hint=hint) from None
        return out

    @property
    def module(self) -> str:
        return Path(self.scorer.__file__).parent.name

    # -- the package's scorer -------------------------------------------------------------

    def parse(self, item_id: str, response: str) -> Any:
        """The response as the package's scorer reads it; None when it is invalid."""
        with _no_bytecode():  # protocol modules beside the scorer load on first use
            return self.scorer.parse(self.keys[item_id], response)

    def score(self, item_id: str, response: str) -> float:
        key = ("score", item_id, response)
        if key not in self.memo:
            with _no_bytecode():
                self.memo[key] = float(self.scorer.score_item(self.keys[item_id], response))
        return self.memo[key]

    def secondary(self, item_id: str, response: str) -> dict[str, Any]:
        """Extra metrics the scorer reports beside the score (none when it has no ``secondary``)."""
        fn = getattr(self.scorer, "secondary", None)
        if fn is None:
            return {}
        with _no_bytecode():
            return dict(fn(self.keys[item_id], response))


def load_package(path: str | Path) -> EvalPackage:
    """Read a package folder; anything that is not an evaluable package is a :class:`UsageError`."""
    folder = Path(path)
    manifest_path = folder / "manifest.json"
    if not folder.exists():
        raise UsageError(f"{folder}: no such package folder")
    if not folder.is_dir() or not manifest_path.is_file():
        raise UsageError(f"{folder}: not a package (no manifest.json)")
    raw = manifest_path.read_bytes()
    try:
        manifest = json.loads(raw)
        if not isinstance(manifest, dict):
            raise ValueError("not an object")
    except (ValueError, UnicodeDecodeError) as exc:
        raise UsageError(f"{manifest_path}: the manifest cannot be read ({exc})") from None
    if not (folder / "items.jsonl").is_file():
        track = manifest.get("track")
        what = f"a {track} package" if track else "this package"
        raise UsageError(f"{folder}: {what} has no items.jsonl; forge eval scores packages of question items")
    items = _read_jsonl(folder / "items.jsonl", "items")
    answers = _read_jsonl(folder / "answers.jsonl", "answer key")
    keys = {row["id"]: row for row in answers}
    missing = [row["id"] for row in items if row["id"] not in keys]
    if missing:
        raise UsageError(f"{folder / 'answers.jsonl'}: {len(missing)} item(s) have no answer, e.g. {missing[0]}")
    seen: set[str] = set()
    for row in items:
        if row["id"] in seen:
            raise UsageError(f"{folder / 'items.jsonl'}: item {row['id']} appears twice")
        seen.add(row["id"])
    composition = {}
    if (folder / "composition.json").is_file():
        try:
            composition = json.loads((folder / "composition.json").read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            composition = {}
    digest = hashlib.sha256(raw).hexdigest()
    scorer = load_scorer(folder, manifest, digest)
    return EvalPackage(folder, manifest, digest, items, keys, scorer, composition)


def load_scorer(folder: Path, manifest: dict[str, Any], digest: str) -> ModuleType:
    """The package's own ``score.py``, imported from the package folder."""
    name = str(manifest.get("name", ""))
    candidates = [folder / name.replace("-", "_") / "score.py"] if name else []
    candidates += sorted(p for p in folder.glob("*/score.py") if p not in candidates)
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise UsageError(f"{folder}: the package ships no scorer (<module>/score.py)")
    module_name = f"_forge_eval_{re.sub(r'[^A-Za-z0-9_]', '_', path.parent.name)}_{digest[:12]}_score"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: cannot be loaded as a module")
    module = importlib.util.module_from_spec(spec)
    try:
        with _no_bytecode():
            spec.loader.exec_module(module)
    except Exception as exc:
        raise UsageError(f"{path}: the package's scorer fails to load ({type(exc).__name__}: {exc})") from None
    lacking = [f for f in SCORER_FUNCTIONS if not callable(getattr(module, f, None))]
    if lacking:
        raise UsageError(f"{path}: the package's scorer has no {', '.join(lacking)}()")
    sys.modules[module_name] = module
    return module


@contextmanager
def _no_bytecode() -> Iterator[None]:
    """No ``__pycache__`` written into the released folder while its modules load."""
    writes = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = writes


def _read_jsonl(path: Path, what: str) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise UsageError(f"{path}: the package has no {what} file") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: the {what} file is not UTF-8 (byte {exc.start})") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise UsageError(f"{path}:{number}: not JSON ({exc})") from None
        if not isinstance(row, dict) or not isinstance(row.get("id"), str):
            raise UsageError(f"{path}:{number}: expected an object with a string \"id\"")
        rows.append(row)
    return rows
