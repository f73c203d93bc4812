"""One build: intent -> workflow -> stage loop -> package, with a summary of what ran."""

from __future__ import annotations

import json

import os
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forge.collector import long_lived_heap
from forge.contracts import ContractBook
from forge.errors import DefinitionError
from forge.faults import FaultPlan
from forge.executor import Executor
from forge.gatelog import GateLog
from forge.intent import load_intent, read_intent_document
from forge.models.client import ModelClient
from forge.models.roles import RoleContext
from forge.export import export
from forge.planner import compose, extra_contract_dirs
from forge.progress import Progress
from forge.repair import RepairLoop, RepairSettings
from forge.resources import descriptor
from forge.refs import forced_scope, resolve
from forge.skills import discover
from forge.store import Store
from forge.registry import entries
from forge.tracks import BuildContext, default_track, track


ABLATIONS = ("final-stage-only", "no-contracts", "no-blind-eval", "no-repair")


@dataclass
class BuildOptions:
    store_dir: Path | None = None
    out_dir: Path = Path("packages_out")
    rebuild_from: list[str] = field(default_factory=list)
    workers: int = 0  # 0: one per CPU core
    progress: bool = True
    ablate: str | None = None  # one of ABLATIONS: switch that part of the loop off
    faults: FaultPlan | None = None  # testing seam: plant defects (see forge.faults)
    executor: str = "local"  # where parallel skills run: a local process pool, "ray" or "ray://ADDRESS"


def default_store_dir(intent_path: Path) -> Path:
    return intent_path.resolve().parent / ".forge"


def build(intent_path: str | Path, options: BuildOptions | None = None) -> dict[str, Any]:
    with long_lived_heap():  # a build keeps its loaded artifacts: full collections would walk them often
        return _build(intent_path, options or BuildOptions())


def _build(intent_path: str | Path, options: BuildOptions) -> dict[str, Any]:
    if options.ablate is not None and options.ablate not in ABLATIONS:
        raise DefinitionError(f"unknown ablation {options.ablate!r}; choose from {', '.join(ABLATIONS)}")
    registry = discover()
    document = read_intent_document(intent_path)  # read once: the track is decided from it, then it is validated
    raw = document.data
    named = raw.get("track")
    spec = track(named if isinstance(named, str) and named in entries("track") else default_track())
    loaded = workflow = None
    if not spec.asks_before_planning(raw):
        loaded = load_intent(intent_path, document=document)
        workflow = compose(loaded, registry)  # type and precondition errors surface here, before any work
    store_dir = options.store_dir or default_store_dir(Path(intent_path))
    t0 = time.perf_counter()
    with Store(store_dir, wait_s=30.0) as store:  # a reader (verify, audit) may be finishing
        build_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        for stale in store.interrupted_builds():  # killed or crashed: we hold the lock, they are gone
            store.mark_interrupted(stale)
        progress = Progress(enabled=options.progress)
        client = ModelClient(store, build_id=build_id)
        if workflow is None:
            # Model roles asked before planning (a coordinator choosing capabilities, a synthesizer
            # writing templates the library lacks): their answers are cached in this store.
            loaded = spec.plan_with_models(Path(intent_path), client, store.root, progress)
            workflow = compose(loaded, registry)
        loaded.intent.models.check_keys()  # a missing API key stops the build now, naming the variable
        contracts = ContractBook.load(extra_contract_dirs(loaded))
        checks_off = options.ablate in ("final-stage-only", "no-contracts")
        if checks_off:
            contracts.tag = options.ablate
        force_keys: set[str] = set()
        force_ids: set[str] = set()
        for ref in options.rebuild_from:
            keys, ids = forced_scope(store, resolve(store, ref))
            force_keys |= keys
            force_ids |= ids
        store.begin_build(build_id, str(loaded.path), loaded.content_hash)
        workers = options.workers or (os.cpu_count() or 1)
        executor = Executor(store, contracts, build_id, workers=workers, progress=progress,
                            force=(lambda inv: inv.run_key in force_keys or bool(force_ids & set(inv.input_ids)))
                            if force_keys else None,
                            faults=options.faults, checks_enabled=not checks_off, executor=options.executor)
        log = GateLog(build_id)
        sources = [descriptor(src.kind) for src in loaded.intent.sources]
        gates = loaded.intent.gates.model_dump()
        repair = None
        if options.ablate not in ("final-stage-only", "no-repair"):
            policy = loaded.intent.repair
            repair = RepairLoop(store, executor, workflow, RepairSettings(policy.budget, policy.escalate_after),
                                build_id, gates, skills=spec.repair_skills, routes=spec.repair_routes,
                                gate_categories=spec.gate_categories)
        roles = RoleContext(client, loaded.intent.models)
        runner = spec.runner(BuildContext(workflow, executor, store, progress, gates=gates, gate_log=log,
                                          sources=sources, repair=repair, ablate=options.ablate, models=roles))
        try:
            state = runner.run()
            pkg = executor.load(runner.package_id(state))
            path, written = export(store, pkg, Path(options.out_dir), recreate=executor.recreate_blob)
        except BaseException as exc:  # whatever ends it, the build is recorded as failed, not running
            try:
                log.flush(store)
                store.end_build(build_id, "failed", {"error": str(exc) or type(exc).__name__})
            except Exception:
                pass  # the store itself failed: the next build marks this one interrupted
            raise
        finally:
            executor.close()
            progress.close()
        summary = _summary(runner, state, build_id, store_dir, path, written, time.perf_counter() - t0, pkg,
                           [s.kind for s in loaded.intent.sources])
        summary["track"] = loaded.intent.track
        summary["ablate"] = options.ablate
        summary["blobs_recreated"] = len(executor.blobs_recreated)
        summary["models"] = _model_summary(store, build_id, roles, summary.get("items_accepted", 0))
        store.end_build(build_id, "ok", summary)
    return summary


def _model_summary(store: Store, build_id: str, roles: RoleContext, accepted: int) -> dict[str, Any]:
    """Which checks ran on a model, what the models were asked and what it cost."""
    from forge.models.accounting import tokens_per_item, totals, usage

    use = usage(store, build_id)
    return {**roles.report(), "usage": use, "totals": totals(use),
            "tokens_per_accepted_item": tokens_per_item(use, accepted)}


def _summary(runner, state: dict[str, Any], build_id: str, store_dir: Path, path: Path, written: bool,
             seconds: float, pkg, kinds: list[str]) -> dict[str, Any]:
    """What ran and what it made; the track's runner adds its own counters (items, gates)."""
    res = runner.results
    units = state.get("units") or {}
    return {
        "build_id": build_id,
        "store": str(store_dir),
        "skills_executed": sum(r.executed for r in res.values()),
        "skills_failed": sum(r.failed for r in res.values()),
        "artifacts_reused": sum(r.reused for r in res.values()),
        "artifacts_created": sum(r.created for r in res.values()),
        "artifacts_reverified": sum(r.reverified for r in res.values()),
        "units_collected": sum(units.values()),
        "units_by_source": {kind: units.get(str(i), 0) for i, kind in enumerate(kinds)},
        "topups": state.get("topups", 0),
        "notes": state.get("notes", []),
        **runner.summary(state),
        "composition_met": _composition_met(path),
        "composition_shortfall": _composition_shortfall(path),
        "nodes": {role: {"executed": r.executed, "reused": r.reused, "created": r.created, "rejected": len(r.rejected),
                         "failed": r.failed, "seconds": round(r.seconds, 3)} for role, r in res.items()},
        "errors": [e for r in res.values() for e in r.errors][:20],
        "stage_seconds": {k: round(v, 3) for k, v in sorted(state.get("stage_seconds", {}).items())},
        "seconds": round(seconds, 3),
        "package_path": str(path),
        "package_written": written,
    }


def _composition_shortfall(package: Path) -> dict[str, Any]:
    """What the track's package says it fell short of (``composition.json``: ``shortfall`` rows
    with part, target, achieved and why; the tolerance and the intent field that sets it)."""
    try:
        composition = json.loads((package / "composition.json").read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(composition, dict) or not composition.get("shortfall"):
        return {}
    return {"parts": composition["shortfall"], "tolerance": composition.get("tolerance"),
            "tolerance_field": composition.get("tolerance_field")}


def _composition_met(package: Path) -> bool | None:
    """Whether the released package meets every capability target within the stated tolerance."""
    try:
        return bool(json.loads((package / "composition.json").read_text())["composition_met"])
    except (OSError, KeyError, ValueError):
        return None
