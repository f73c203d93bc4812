"""Reading YAML that people write (intents, templates, contracts), bounded.

One parse, with libyaml where it is installed: the file is composed into nodes once, the nodes
are measured, then built into Python objects. A file larger than its limit, deeper than
``MAX_DEPTH`` or growing past ``max_nodes`` once its aliases are expanded (a "billion laughs"
file of a few hundred bytes) is refused before anything is built from it. Errors name the
file and line, never the file's contents.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from forge.errors import ForgeError, IntentError

try:  # libyaml: several times faster than the pure-Python parser
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

MAX_DEPTH = 64

Path_ = tuple[Any, ...]


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_nodes: int


INTENT_LIMITS = Limits(max_bytes=1 << 20, max_nodes=100_000)
TEMPLATE_LIMITS = Limits(max_bytes=256 << 10, max_nodes=20_000)
CONTRACT_LIMITS = Limits(max_bytes=1 << 20, max_nodes=50_000)


@dataclass(frozen=True)
class YamlDocument:
    data: Any
    lines: dict[Path_, int]  # field path -> 1-based line where it appears


def read_yaml(path: Path, limits: Limits, *, what: str = "file",
              error: type[ForgeError] = IntentError) -> YamlDocument:
    """Parse ``path`` once within ``limits``; every failure is ``error`` naming the file."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    if size > limits.max_bytes:
        raise error(f"{path}: the {what} is {_size(size)}; a {what} may be at most {_size(limits.max_bytes)}")
    try:
        text = path.read_bytes()[: limits.max_bytes + 1].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: the {what} is not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise error(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None
    return parse_yaml(text, path, limits, what=what, error=error)


def parse_yaml(text: str, path: Path | str, limits: Limits, *, what: str = "file",
               error: type[ForgeError] = IntentError) -> YamlDocument:
    loader = _Loader(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise error(f"{_where(path, exc)}: YAML syntax error: {_problem(exc)}") from None
        if node is None:
            return YamlDocument(None, {})
        nodes, depth = _measure(node)
        if depth > MAX_DEPTH:
            raise error(f"{path}: the {what} nests {depth} levels deep; at most {MAX_DEPTH} are allowed")
        if nodes > limits.max_nodes:
            raise error(f"{path}: the {what} expands to more than {limits.max_nodes:,} values once its aliases "
                        f"(*name) are expanded; refusing it")
        try:
            data = loader.construct_document(node)
        except yaml.YAMLError as exc:
            raise error(f"{_where(path, exc)}: YAML error: {_problem(exc)}") from None
        return YamlDocument(data, _line_index(node))
    finally:
        loader.dispose()


def _measure(root: yaml.Node) -> tuple[int, int]:
    """(values after alias expansion, nesting depth); aliases share node objects, so each
    distinct node is sized once and counted as often as it is referenced. Stops counting once
    a node is seen as its own ancestor (a recursive alias)."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size.get(id(c), 1 << 40) for c in children)
            depth[key] = 1 + max((depth.get(id(c), 0) for c in children), default=0)
            if depth[key] > MAX_DEPTH:
                return size[key], depth[key]
            continue
        if key in size:
            continue
        if key in on_path:  # a node containing itself: infinite once expanded
            return 1 << 40, 1
        on_path.add(key)
        stack.append((node, True))
        if len(on_path) > MAX_DEPTH:
            return 1, len(on_path)
        stack.extend((c, False) for c in children if id(c) not in size)
    return size[id(root)], depth[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _line_index(root: yaml.Node) -> dict[Path_, int]:
    """Each field path -> its line, visiting every distinct node once (paths through an alias
    are left to their nearest indexed parent)."""
    index: dict[Path_, int] = {}
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, Path_]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        index.setdefault(path, node.start_mark.line + 1)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                k = key.value if isinstance(key, yaml.ScalarNode) else str(key.start_mark.line)
                index[path + (k,)] = key.start_mark.line + 1
                stack.append((value, path + (k,)))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                stack.append((item, path + (i,)))
    return index


def _where(path: Path | str, exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)


def _problem(exc: yaml.YAMLError) -> str:
    # The problem only: a YAML error's full text quotes the offending line of the file.
    return str(getattr(exc, "problem", None) or type(exc).__name__)


def _size(n: int) -> str:
    return f"{n / (1 << 20):.1f} MB" if n >= 1 << 20 else f"{n / 1024:.0f} KB"
