"""Architecture kept by tests: the engine (``forge/``) imports no plugin (the built-in skills,
resources, contracts and templates are plugins like any other), modules import each other
without cycles, and the store's private methods stay private."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PRIVATE = {"_ids_query"}


def test_no_module_outside_the_store_calls_its_private_queries():
    offenders = []
    for folder in ("forge", "forge_skills", "forge_resources", "benchmarks", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            if path == ROOT / "forge" / "store.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, offenders


PACKAGES = {"forge": "forge", "forge_skills": "forge_skills", "forge_resources": "forge_resources"}
PLUGINS = {"forge_skills", "forge_resources", "forge_contracts", "forge_templates"}


def _module_graph() -> nx.DiGraph:
    """Module -> modules it imports (at the top or inside functions), for the project's packages."""
    modules = {}
    for package, folder in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            modules[".".join([package] + (parts[:-1] if parts[-1] == "__init__" else parts))] = path
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for node in _runtime_nodes(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # "from package import module" imports the module, not only the package
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]
            for t in targets:
                if t.split(".")[0] in PLUGINS | {"forge"} and t != name:
                    graph.add_edge(name, t)
    return graph


def _runtime_nodes(tree: ast.AST):
    """Every node except those under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            skip |= {id(n) for child in node.body for n in ast.walk(child)}
    return (n for n in ast.walk(tree) if id(n) not in skip)


def test_the_engine_imports_no_plugin():
    graph = _module_graph()
    bad = sorted((a, b) for a, b in graph.edges if a.split(".")[0] == "forge" and b.split(".")[0] in PLUGINS)
    assert not bad, bad


def test_no_import_cycles():
    cycles = list(nx.simple_cycles(_module_graph()))
    assert not cycles, cycles[:5]


def _folder(module: str) -> str:
    """The package a module belongs to (a package's ``__init__`` belongs to the package itself)."""
    path = ROOT / PACKAGES[module.split(".")[0]] / Path(*module.split(".")[1:])
    return module if path.is_dir() else module.rsplit(".", 1)[0]


def test_no_folder_import_cycles():
    """Folders import each other one way: a track's home and the shared folders beside it never
    both import from the other (a folder and its own subfolders may)."""
    folders = nx.DiGraph()
    for a, b in _module_graph().edges:
        if b.split(".")[0] not in PACKAGES:
            continue
        fa, fb = _folder(a), _folder(b)
        if fa != fb and not fa.startswith(fb + ".") and not fb.startswith(fa + "."):
            folders.add_edge(fa, fb)
    assert {"forge_skills.oe", "forge_skills.ie", "forge_skills.package"} <= set(folders.nodes)
    cycles = list(nx.simple_cycles(folders))
    assert not cycles, cycles[:5]


def _plugin_gate_codes() -> set[str]:
    """Every gate code the plugins declare (``GateId("C1")``)."""
    codes = set()
    for folder in ("forge_skills", "forge_resources"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "GateId"
                        and node.args and isinstance(node.args[0], ast.Constant)):
                    codes.add(node.args[0].value)
    return codes


def test_the_engine_names_no_track_artifact_type_of_a_track_gate_or_source_kind():
    """``forge/`` asks the registry for what tracks provide: no string, name or attribute in it is
    a registered track, a plugin's artifact type, a plugin's gate code or a source kind."""
    from forge.artifact_types import ARTIFACT_TYPES
    from forge.registry import entries

    tracks = set(entries("track"))
    kinds = set(entries("source_kind"))
    types = {n for n, cls in ARTIFACT_TYPES.items() if not cls.__module__.startswith("forge.")}
    gates = _plugin_gate_codes()
    assert {"oe", "ie"} <= tracks and "pybullet_tabletop" in kinds and {"OEItem", "IETask"} <= types
    assert {"C1", "B2", "A"} <= gates  # the scan sees what it must not find
    named = tracks | kinds | types | gates
    found = []
    for path in sorted((ROOT / "forge").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            value = (node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else
                     node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None)
            if value in named:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {value!r}")
    assert not found, found


MAX_MODULE_LINES = 500


def test_no_module_is_over_500_lines():
    """A module that long does several things; each concept gets its own (the engine, the
    built-in plugin and the resource adapters)."""
    long = {str(p.relative_to(ROOT)): n for folder in PACKAGES.values() for p in (ROOT / folder).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, long


def test_code_that_moved_behind_the_registry_still_counts_for_what_runs_it():
    """Gate E's assessment runs the IE track's episode panel through the registry: the panel's
    code (agents, episodes, metrics) is part of the assessment's code version. The panel memo's
    key covers every module the simulated replies come from."""
    from forge.evaluation import item_memo
    from forge.skills import REGISTRY, discover

    discover()
    labels = set(REGISTRY.get("package.assess").data_files({}))
    assert {"code episode_panel:builtin forge_skills.ie.episode_panel",
            "code episode_panel:builtin forge_skills.ie.evaluation",
            "code episode_panel:builtin forge_skills.ie.agents"} <= labels, sorted(labels)[:10]
    here = Path(item_memo.__file__).parent
    replies = {"solvers", "responses", "run", "session"}  # what the built-in members answer with
    assert replies <= {Path(name).stem for name in item_memo._CODE}
    assert all((here / name).is_file() for name in item_memo._CODE)
