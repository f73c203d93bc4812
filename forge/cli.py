"""The ``forge`` command line. User errors print one clear message (no traceback) and exit
with the error's code; ``--json`` prints machine-readable output on stdout."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import click

from forge.errors import ForgeError, StoreError, UsageError


def _emit(data: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        render(data)


def _guard(fn: Callable[[], None]) -> None:
    """Run a command; what goes wrong ends in one line and an exit code, not a traceback:
    forge's own errors with theirs, the machine's (files, permissions, disk) with 1."""
    try:
        fn()
    except ForgeError as exc:
        click.echo(f"forge: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("forge: interrupted; run the same command again to resume", err=True)
        sys.exit(130)
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        click.echo(f"forge: error: {exc.strerror or exc}{where}", err=True)
        sys.exit(1)
    except Exception as exc:
        import duckdb

        if not isinstance(exc, duckdb.Error):
            raise
        # A store opens lazily: damage in a page shows on the first query that reads it.
        from forge.database import damaged_store

        click.echo(f"forge: error: {damaged_store(None, exc)}", err=True)
        sys.exit(1)
    except MemoryError:
        click.echo("forge: error: out of memory", err=True)
        sys.exit(1)


def _store_for(store: str | None, intent: str | None) -> Path:
    if store:
        return Path(store)
    if intent:
        from forge.build import default_store_dir

        return default_store_dir(Path(intent))
    return Path(".forge")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="forge-bench")
def main() -> None:
    """forge: build verified embodied-AI benchmarks from an evaluation intent."""


def _build_options(store: str | None, out: str, workers: int, quiet: bool, as_json: bool, rebuild_from=(),
                   ablate: str | None = None, faults: str | None = None, executor: str = "local"):
    from forge.build import BuildOptions

    if executor != "local" and executor != "ray" and not executor.startswith("ray://"):
        raise UsageError(f"--executor {executor!r}: choose local, ray or ray://HOST:PORT")
    return BuildOptions(store_dir=Path(store) if store else None, out_dir=Path(out), workers=workers,
                        progress=not (quiet or as_json), rebuild_from=list(rebuild_from), ablate=ablate,
                        faults=_fault_plan(faults) if faults else None, executor=executor)


def _fault_plan(path: str):
    """A fault plan from JSON: a list of {kind, skill, rate, where, limit, seed}."""
    from forge.errors import DefinitionError
    from forge.faults import Fault, FaultPlan

    try:
        raw = json.loads(Path(path).read_text())
        return FaultPlan([Fault(**f) for f in raw])
    except (OSError, ValueError, TypeError) as exc:
        raise DefinitionError(f"{path}: invalid fault plan: {exc}") from None


def _print_summary(s: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    from forge.tracks import track

    console = Console(stderr=False)
    t = Table(title=f"forge build {s['build_id']}", show_header=False)
    rows = [(k, k.replace("_", " ")) for k in ("skills_executed", "skills_failed", "artifacts_created",
                                                 "artifacts_reused")]
    rows += [*track(s["track"]).summary_rows, ("seconds", "seconds")]
    for key, label in rows:
        if key in s:
            t.add_row(label, str(s[key]))
    console.print(t)
    g = Table(title="gates", show_header=True)
    for col in ("gate", "pass", "fail"):
        g.add_column(col)
    for gate, counts in sorted(s["gates"].items()):
        g.add_row(gate, str(counts.get("pass", 0)), str(counts.get("fail", 0)))
    console.print(g)
    rep = s.get("repair") or {}
    if rep.get("operators"):
        r = Table(title=f"repairs ({rep['rounds']} rounds; {rep['artifacts_rebuilt']} artifacts rebuilt, "
                        f"{rep['artifacts_kept']} kept)", show_header=True)
        for col in ("operator", "repairs", "artifacts", "succeeded", "rebuilt", "seconds"):
            r.add_column(col)
        for op, row in rep["operators"].items():
            r.add_row(op, *(str(row[k]) for k in ("repairs", "artifacts", "succeeded", "rebuilt", "seconds")))
        console.print(r)
    flagged = [t for t, v in (s.get("templates") or {}).items()
               if v["grey_batch"] == "fail" or v["blind"].get("flagged")]
    if flagged:
        console.print(f"[yellow]templates held back:[/yellow] {', '.join(flagged)}")
    for cap, why in (s.get("capabilities_unavailable") or {}).items():
        console.print(f"[yellow]not included:[/yellow] {cap}: {why}")
    models = s.get("models") or {}
    totals = models.get("totals") or {}
    if totals.get("calls") or totals.get("cache_hits"):
        per = models.get("tokens_per_accepted_item")
        console.print(f"models: {totals['calls']} calls, {totals['cache_hits']} cached answers, "
                      f"{totals['tokens_in'] + totals['tokens_out']} tokens"
                      + (f" = {per:.1f} per accepted item" if per is not None else ""))
    if models.get("without_model"):
        console.print(f"without a model (built-in backends): {'; '.join(models['without_model'])}")
    for member, use in (s.get("gate_E_models") or {}).items():
        console.print(f"gate E: {member} answered {use['items']} items ({use['tokens_in'] + use['tokens_out']} "
                      "tokens of evaluation, not counted as construction)")
    for e in s["errors"][:5]:
        console.print(f"[red]failed:[/red] {e}")
    console.print(f"package: [bold]{s['package_path']}[/bold]")


@main.command()
@click.argument("intent", type=click.Path(dir_okay=False))
@click.option("--store", type=click.Path(file_okay=False), help="store folder (default: .forge next to the intent)")
@click.option("--out", default="packages_out", show_default=True, type=click.Path(file_okay=False), help="package output folder")
@click.option("--workers", default=0, show_default=True, help="worker processes for parallel skills (0: one per core)")
@click.option("--quiet", is_flag=True, help="no progress output")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
@click.option("--ablate", type=click.Choice(["final-stage-only", "no-contracts", "no-blind-eval", "no-repair"]),
              help="switch one part of the closed loop off (for ablation studies)")
@click.option("--faults", type=click.Path(dir_okay=False, exists=True), hidden=True,
              help="testing seam: a JSON fault plan of defects to plant")
@click.option("--executor", default="local", show_default=True,
              help="where parallel skills run: local (a process pool), ray (a local Ray cluster of --workers "
                   "CPUs) or ray://HOST:PORT (a running cluster sharing the store folder)")
def build(intent: str, store: str | None, out: str, workers: int, quiet: bool, as_json: bool,
          ablate: str | None, faults: str | None, executor: str) -> None:
    """Plan, collect, structure, synthesize, verify and package the benchmark of INTENT."""
    def run() -> None:
        from forge.build import build as do_build

        summary = do_build(intent, _build_options(store, out, workers, quiet, as_json, ablate=ablate, faults=faults,
                                                  executor=executor))
        _emit(summary, as_json, _print_summary)
        _exit_if_short(summary)
    _guard(run)


SHORTFALL_EXIT = 4  # the package is written, but a composition target is missed beyond the tolerance


def _exit_if_short(summary: dict[str, Any]) -> None:
    """A package that misses a composition target beyond the intent's tolerance is not a success:
    name each shortfall and exit 4 (the package stays written for inspection)."""
    if summary.get("composition_met") is not False:
        return
    short = summary.get("composition_shortfall") or {}
    tolerance, field = short.get("tolerance"), short.get("tolerance_field") or "the tolerance"
    allowed = f" (tolerance {tolerance:.0%})" if isinstance(tolerance, (int, float)) else ""
    for row in short.get("parts") or []:
        why = f": {row['why']}" if row.get("why") else ""
        click.echo(f"forge: composition not met: {row.get('part')}: {row.get('achieved')} of {row.get('target')}"
                   f"{allowed}{why}", err=True)
    click.echo(f"forge: the package at {summary.get('package_path')} misses its composition; raise {field} to "
               "accept it, or widen the sources", err=True)
    sys.exit(SHORTFALL_EXIT)


@main.command()
@click.option("--from", "ref", required=True, help="artifact id (prefix), template id, skill name or stage S1-S5")
@click.argument("intent", required=False, type=click.Path(dir_okay=False))
@click.option("--store", type=click.Path(file_okay=False))
@click.option("--out", default="packages_out", show_default=True, type=click.Path(file_okay=False))
@click.option("--workers", default=0, show_default=True)
@click.option("--quiet", is_flag=True)
@click.option("--json", "as_json", is_flag=True)
def rebuild(ref: str, intent: str | None, store: str | None, out: str, workers: int, quiet: bool, as_json: bool) -> None:
    """Force re-execution from REF and its descendants only, then finish the build."""
    def run() -> None:
        from forge.build import build as do_build
        from forge.store import Store

        store_dir = _store_for(store, intent)
        intent_path = intent
        if intent_path is None:
            with Store(store_dir, read_only=True) as s:
                row = s.one("SELECT intent_path FROM builds ORDER BY started_at DESC LIMIT 1")
            if row is None:
                raise StoreError(f"{store_dir}: no build recorded; give the intent file")
            intent_path = row[0]
        summary = do_build(intent_path, _build_options(str(store_dir), out, workers, quiet, as_json, [ref]))
        _emit(summary, as_json, _print_summary)
        _exit_if_short(summary)
    _guard(run)


@main.command()
@click.argument("intent", required=False, type=click.Path(dir_okay=False))
@click.option("--store", type=click.Path(file_okay=False), help="store folder (default: .forge next to the intent, else ./.forge)")
@click.option("--json", "as_json", is_flag=True)
@click.option("--all", "show_all", is_flag=True, help="list every stale artifact")
def status(intent: str | None, store: str | None, as_json: bool, show_all: bool) -> None:
    """What is stale since the last build, and why (code / data / dependency / contract)."""
    def run() -> None:
        from forge.status import stale_report
        from forge.store import Store

        with Store(_store_for(store, intent), read_only=True) as s:
            report = stale_report(s)

        def render(r: dict[str, Any]) -> None:
            if r["build_id"] is None:
                click.echo(r["message"])
                return
            click.echo(f"last build {r['build_id']} ({r['artifacts_in_build']} artifacts) from {r['intent']}")
            if not r["stale_artifacts"]:
                click.echo("nothing is stale: the next build executes no skill")
                return
            click.echo(f"{r['stale_artifacts']} stale artifacts:")
            for c in r["causes"]:
                types = ", ".join(f"{n} {t}" for t, n in c["types"].items())
                click.echo(f"  [{c['cause']}] {c['root']}: {types}")
            if show_all:
                for a in r["artifacts"]:
                    click.echo(f"    {a['id']}  {a['type']:<15} {a['cause']:<10} {a['root']}")
        _emit(report, as_json, render)
    _guard(run)


@main.command()
@click.argument("item_id")
@click.option("--store", type=click.Path(file_okay=False))
@click.option("--intent", type=click.Path(dir_okay=False), help="find the store next to this intent")
@click.option("--json", "as_json", is_flag=True)
def audit(item_id: str, store: str | None, intent: str | None, as_json: bool) -> None:
    """The lineage of ITEM_ID (or any artifact id prefix) back to its sources."""
    def run() -> None:
        from forge.audit import audit as do_audit
        from forge.store import Store

        with Store(_store_for(store, intent), read_only=True) as s:
            report = do_audit(s, item_id)

        def render(r: dict[str, Any]) -> None:
            click.echo(f"{r['type']} {r['artifact']} [{r['status']}]")
            for x in r["lineage"]:
                failed = [v["requirement"] for v in x["verifications"] if not v["passed"]]
                checks = f"{len(x['verifications'])} checks" + (f", failed {failed}" if failed else ", all passed")
                click.echo(f"  {x['type']:<15} {x['id'][:16]}  {x['skill']}  code {str(x['code_version'])[:10]}  {checks}")
                click.echo(f"      {x['summary']}")
                for g in x["gate_decisions"]:
                    click.echo(f"      gate {g['gate']}: {g['decision']}")
            click.echo("sources: " + ", ".join(f"{s['type']} {s['id'][:16]}" for s in r["sources"]))
            click.echo("data files: " + ", ".join(r["data_files"]))
            for rep in r["repairs"]:
                click.echo(f"repair: {rep['operator']} of {rep['type']} {rep['prior'][:16]} -> {rep['artifact'][:16]} "
                           f"(violated {rep['violated']}, attempt {rep['attempt']}, re-executed {len(rep['rebuilt'])} artifacts)")
                for field, ba in rep["changed"].items():
                    click.echo(f"      {field}: {str(ba['before'])[:60]!s} -> {str(ba['after'])[:60]!s}")
        _emit(report, as_json, render)
    _guard(run)


@main.command()
@click.option("--json", "as_json", is_flag=True)
def skills(as_json: bool) -> None:
    """The registered skills with their typed signatures."""
    def run() -> None:
        from forge.skills import discover

        rows = [{"name": s.name, "stage": s.stage, "inputs": {i.name: (f"list[{i.type}]" if i.many else i.type) for i in s.inputs},
                 "output": s.output, "module": s.module, "code_version": s.module_version(),
                 "requires": list(s.requires), "parallel": s.parallel, "description": s.description}
                for s in discover()]

        def render(rs: list[dict[str, Any]]) -> None:
            for r in rs:
                ins = ", ".join(f"{k}: {v}" for k, v in r["inputs"].items())
                click.echo(f"{r['stage']}  {r['name']:<34} ({ins}) -> list[{r['output']}]")
                click.echo(f"      {r['description']}")
        _emit(rows, as_json, render)
    _guard(run)


@main.command()
@click.option("--json", "as_json", is_flag=True)
def resources(as_json: bool) -> None:
    """Sources and simulators known here, and whether each is available on this machine."""
    def run() -> None:
        from forge.resources import describe

        def render(rs: list[dict[str, Any]]) -> None:
            for r in rs:
                mark = "available" if r["available"] else f"unavailable: {r['reason']}"
                click.echo(f"{r['kind']:<22} track {r['track']}  {mark}\n      {r['description']}")
        _emit(describe(), as_json, render)
    _guard(run)


@main.command()
@click.option("--source", "sources", multiple=True, help="only templates these source kinds serve (repeatable)")
@click.option("--intent", "intent", type=click.Path(dir_okay=False), default=None,
              help="the templates an intent's sources and template folders offer")
@click.option("--json", "as_json", is_flag=True)
def templates(sources: tuple[str, ...], intent: str | None, as_json: bool) -> None:
    """Templates with their capability, question type and the source kinds they serve."""
    def run() -> None:
        from forge.planner import available_templates
        from forge.registry import lookup
        from forge.resources import descriptor, descriptors

        kinds = list(sources) or sorted(descriptors())
        for kind in kinds:
            descriptor(kind)  # an unknown kind is a clear error naming the known ones
        if intent is not None:
            from forge.intent import load_intent

            loaded = load_intent(intent)
            rows = available_templates(loaded)
            kinds = sorted({s.kind for s in loaded.intent.sources})
        else:
            families = sorted({f for k in kinds for f in descriptor(k).templates})
            rows = lookup("template_catalogue", "builtin")(families, [])
        for r in rows:
            r["sources"] = [k for k in kinds if r["family"] in descriptor(k).templates] or ["(intent folder)"]

        def render(rs: list[dict[str, Any]]) -> None:
            for r in rs:
                click.echo(f"{r['id']:<34} {r['capability']:<22} {r['question_type']:<22} {', '.join(r['sources'])}")
        _emit(rows, as_json, render)
    _guard(run)


@main.command()
@click.argument("text", required=False)
@click.option("--json", "as_json", is_flag=True)
def capabilities(text: str | None, as_json: bool) -> None:
    """Map free text to capabilities with the catalogue (an intent's `oe.focus`); without TEXT,
    list the capabilities and the phrases that select them."""
    def run() -> None:
        from forge.capability_catalogue import capabilities_from_text
        from forge.vocabulary import capabilities as registered

        caps = registered()
        if text is None:
            rows = {c: {"description": cap.description, "phrases": list(cap.phrases)} for c, cap in caps.items()}
        else:
            rows = {c: {"description": caps[c].description, "matched": hits}
                    for c, hits in capabilities_from_text(text).items()}
            if not rows:
                raise UsageError("the text names no capability the catalogue knows")

        def render(rs: dict[str, Any]) -> None:
            for cap, r in rs.items():
                detail = ", ".join(r.get("matched") or r.get("phrases", []))
                click.echo(f"{cap:<22} {r['description']}\n      {detail}")
        _emit(rows, as_json, render)
    _guard(run)


@main.command()
@click.argument("package", type=click.Path(file_okay=False))
@click.option("--store", "store", type=click.Path(file_okay=False), default=None,
              help="the store the package was built in (default: beside --intent, else ./.forge)")
@click.option("--intent", "intent", type=click.Path(dir_okay=False), default=None,
              help="the intent it was built from: its store is the .forge folder beside it")
@click.option("--json", "as_json", is_flag=True)
def reverify(package: str, store: str | None, intent: str | None, as_json: bool) -> None:
    """Recompute every released answer from raw simulator arrays or dataset files, independently
    of the evidence and construction code; exit 1 when any item is invalid."""
    def run() -> None:
        from forge.export import verify_package
        from forge.registry import lookup
        from forge.tracks import default_track
        from forge.store import DB_NAME, Store

        target = Path(package)
        if not (target / "manifest.json").exists():
            raise UsageError(f"{target}: not a package (no manifest.json)")
        try:
            track_name = json.loads((target / "manifest.json").read_text()).get("track", default_track())
        except (OSError, ValueError, AttributeError):
            track_name = default_track()
        reverify_package = lookup("reverifier", track_name)
        store_dir = _store_for(store, intent)
        if not (store_dir / DB_NAME).exists():
            raise UsageError(f"{store_dir}: no forge store there; pass --store DIR (the store the package was "
                             "built in) or --intent FILE (a build keeps its store in .forge/ beside the intent)")
        problems = verify_package(target)

        def progress(done: int, total: int) -> None:
            if not as_json:
                click.echo(f"  re-verified {done}/{total} items", err=True)

        with Store(store_dir, read_only=True) as s:
            snapshot = s.snapshot(_package_item_ids(target))
        report = reverify_package(snapshot, target, progress)
        report["file_problems"] = problems + [p for p in report.get("file_problems", []) if p not in problems]

        def render(r: dict[str, Any]) -> None:
            click.echo(f"{r['items']} items: {r['valid']} valid, {r['invalid']} invalid "
                       f"(valid rate {r['valid_rate']:.4f}); {len(problems)} file problems")
            for iid, why in list(r["reasons"].items())[:20]:
                click.echo(f"  {iid[:12]}  {why}")
            for p in problems[:20]:
                click.echo(f"  {p}")
        _emit(report, as_json, render)
        if report["invalid"] or problems:
            sys.exit(1)
    _guard(run)


def _package_item_ids(package: Path) -> list[str]:
    from forge.verify import _item_ids

    return _item_ids(package)


@main.command()
@click.argument("package", type=click.Path(file_okay=False))
@click.option("--store", "store", type=click.Path(file_okay=False), default=None,
              help="the store the package was built in (re-verifies every answer)")
@click.option("--intent", "intent", type=click.Path(dir_okay=False), default=None,
              help="the intent it was built from: its store is the .forge folder beside it")
@click.option("--json", "as_json", is_flag=True)
def verify(package: str, store: str | None, intent: str | None, as_json: bool) -> None:
    """Check that PACKAGE is intact (every file against its checksum) and, given its store,
    that every answer is right. Exit 0: intact and valid; 1: damage or invalid items; 2: not
    a package."""
    def run() -> None:
        from forge.verify import verify_package

        store_dir = Path(store) if store else (_store_for(None, intent) if intent else None)

        def progress(done: int, total: int) -> None:
            if not as_json:
                click.echo(f"  re-verified {done}/{total} items", err=True)

        report = verify_package(Path(package), store_dir, progress)

        def render(r: dict[str, Any]) -> None:
            click.echo(f"{r['package']}: {len(r['file_problems'])} file problems")
            for p in r["file_problems"][:30]:
                click.echo(f"  {p}")
            click.echo(f"reported numbers: {len(r['metric_problems'])} do not follow from the package's records")
            for p in r["metric_problems"][:30]:
                click.echo(f"  {p}")
            if r["reverified"]:
                click.echo(f"{r['items']} items: {r['valid']} valid, {r['invalid']} invalid")
                for iid, why in list(r["reasons"].items())[:20]:
                    click.echo(f"  {iid[:12]}  {why}")
            else:
                click.echo(r["note"])
            click.echo("intact" if r["ok"] else "NOT intact")
        _emit(report, as_json, render)
        if not report["ok"]:
            sys.exit(1)
    _guard(run)


@main.command()
@click.argument("intent", required=False, type=click.Path(dir_okay=False))
@click.option("--store", type=click.Path(file_okay=False), help="store folder (default: .forge next to the intent, else ./.forge)")
@click.option("--repair", is_flag=True, help="fix what provenance allows: re-make damaged or missing blobs from the "
                                              "runs that wrote them, remove orphan rows and temporary files, mark "
                                              "interrupted builds failed, set a damaged write-ahead log aside")
@click.option("--json", "as_json", is_flag=True)
def fsck(intent: str | None, store: str | None, repair: bool, as_json: bool) -> None:
    """Check a store: blobs against their digests, rows that point at nothing, builds that never
    finished. Exit 0 when nothing is left unrepaired, 1 otherwise."""
    def run() -> None:
        from forge.integrity import fsck as do_fsck, set_wal_aside, summarize
        from forge.store import DB_NAME, Store

        store_dir = _store_for(store, intent)
        if not (store_dir / DB_NAME).exists():
            raise UsageError(f"{store_dir}: no forge store there (missing {DB_NAME})")
        notes = []
        try:
            opened = Store(store_dir)
        except StoreError as exc:
            if not repair or not (store_dir / (DB_NAME + ".wal")).exists() or "damaged" not in exc.message:
                raise
            notes.append(set_wal_aside(store_dir / (DB_NAME + ".wal")))
            opened = Store(store_dir)
        with opened as s:
            report = summarize(do_fsck(s, repair=repair, progress=None if as_json else
                                       (lambda m: click.echo(f"  {m}", err=True))))
        report["notes"] = notes

        def render(r: dict[str, Any]) -> None:
            for note in r["notes"]:
                click.echo(note)
            if not r["findings"]:
                click.echo("store is consistent")
            for kind, row in sorted(r["kinds"].items()):
                click.echo(f"{kind:<24} {row['found']:>6} found, {row['repaired']:>6} repaired")
            for f in [f for f in r["findings"] if not f["repaired"]][:20]:
                click.echo(f"  {f['kind']}: {f['subject'][:40]}  {f['detail']}")
        _emit(report, as_json, render)
        if report["unrepaired"]:
            sys.exit(1)
    _guard(run)


@main.command()
@click.argument("package", required=False, type=click.Path(file_okay=False))
@click.option("--n", "count", default=40, show_default=True, help="items to sample for review")
@click.option("--seed", type=int, help="sampling seed (default: from the package snapshot)")
@click.option("--out", type=click.Path(dir_okay=False), help="page to write (default: PACKAGE/review.html)")
@click.option("--store", type=click.Path(file_okay=False), help="store the package was built from (embeds media the "
                                                                 "package only references; needed with --import)")
@click.option("--import", "verdicts", type=click.Path(dir_okay=False), help="a saved verdicts file to store")
@click.option("--json", "as_json", is_flag=True)
def review(package: str | None, count: int, seed: int | None, out: str | None, store: str | None,
           verdicts: str | None, as_json: bool) -> None:
    """Write a review page of random items of PACKAGE, or store the verdicts a reviewer saved.

    A person marks each item correct, ambiguous or wrong, and whether it is trivial (answerable
    at a glance); `--import` records the verdicts as human verification records, and the next
    `forge build` repairs or removes the items marked ambiguous or wrong and reports the accuracy
    people found."""
    def run() -> None:
        from forge import review as rv

        if verdicts:
            if not store:
                raise UsageError("--import needs --store: the store the reviewed package was built from")
            result = rv.import_verdicts(Path(verdicts), Path(store))
            _emit(result, as_json, lambda r: click.echo(
                f"{r['imported']} verdicts by {r['reviewer']}: {r['correct']} correct, {r['ambiguous']} ambiguous, "
                f"{r['wrong']} wrong, {r['trivial']} marked trivial; {r['routed_to_repair']} item(s) go to diagnosis "
                f"and repair on the next `forge build`"))
            return
        if not package:
            raise UsageError("give a PACKAGE to review, or --import FILE --store DIR")
        page = rv.write_page(Path(package), Path(out) if out else None, count, seed, Path(store) if store else None)
        _emit({"page": str(page)}, as_json, lambda r: click.echo(f"review page: {r['page']} (open it in a browser, "
                                                                  "mark the items, save the verdicts)"))
    _guard(run)


@main.command()
@click.argument("package", type=click.Path(file_okay=False))
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="where to write the page (default: PACKAGE/.eval/report.html, beside the released files)")
@click.option("--irt-backend", "irt_backend", type=click.Choice(["2pl", "py-irt"]), default="2pl",
              help="py-irt: also fit the Bayesian 2PL (the irt-bayes extra) and report its agreement with the "
                   "regularized fit")
@click.option("--json", "as_json", is_flag=True, help="print the report's numbers as JSON")
def report(package: str, out: str | None, irt_backend: str, as_json: bool) -> None:
    """Write PACKAGE's evaluation report (composition, gate funnel, repairs, skill reuse, scores per
    model and capability, IRT diagnosis, blind margins, human review) as one self-contained HTML
    page, recomputed from the package's own records; runs of `forge eval` stored beside the package
    are added. The same page ships in the package as report.html."""
    def run() -> None:
        from forge.registry import entries

        folder = Path(package)
        if not (folder / "manifest.json").is_file():
            raise UsageError(f"{folder}: not a package (no manifest.json)")
        renderers = entries("package_report")
        if not renderers:
            raise UsageError("no report renderer is registered (the built-in skills provide one)")
        try:
            page, numbers = next(iter(renderers.values()))(folder, irt_backend=irt_backend)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        target = Path(out) if out else folder / ".eval" / "report.html"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(page, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{target}: cannot write the report ({exc.strerror or exc})") from None
        _emit({"report": str(target), "numbers": numbers}, as_json,
              lambda r: click.echo(f"report: {r['report']} ({len(r['numbers']['models'])} panel members, "
                                   f"{r['numbers']['package']['items']} items, "
                                   f"{len(r['numbers']['irt']['flagged'])} items flagged by IRT)"))
    _guard(run)


@main.command("intent-schema")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write to this file instead of stdout")
def intent_schema(output: str | None) -> None:
    """Write the JSON schema of intent.yaml (for editor validation)."""
    from forge.intent import intent_json_schema

    text = json.dumps(intent_json_schema(), indent=2)
    if output:
        Path(output).write_text(text + "\n")
    else:
        click.echo(text)


@main.command("eval")
@click.argument("package", type=click.Path())
@click.option("--model", "models", multiple=True,
              help="builtin:NAME (random, prior, text, oracle-noisy:RATE; simulated), BASE_URL@MODEL (an "
                   "OpenAI-compatible endpoint) or @FILE.yaml (a model role); repeatable")
@click.option("--agent", "agents", multiple=True,
              help="for an IE package: reference, random[:SEED], greedy, BASE_URL@MODEL or @FILE.yaml; repeatable")
@click.option("--store", type=click.Path(file_okay=False), help="where responses are stored (default: PACKAGE/.eval)")
@click.option("--limit", type=click.IntRange(min=1), help="only the first N items")
@click.option("--json", "as_json", is_flag=True, help="print the reports as JSON")
def eval_(package: str, models: tuple[str, ...], agents: tuple[str, ...], store: str | None, limit: int | None,
          as_json: bool) -> None:
    """Run models on PACKAGE's items, score the replies with its own scorer, and report accuracy
    per capability and question type. Stopped runs resume: answered items are not asked again."""
    def run() -> None:
        from forge.evaluation import EvalOptions, evaluate, load_package, parse_spec, render
        from forge.models import ModelError

        from forge.evaluation.run import track_evaluator

        if not models and not agents:
            raise UsageError("give --model SPEC (a package of question items) or --agent SPEC (an IE package)")
        by_track = track_evaluator(package)
        if by_track is not None:  # episodes: every --agent and --model is an agent
            pkg, specs = by_track.load(package), [by_track.parse_agent(a) for a in (*agents, *models)]
        elif agents:
            raise UsageError(f"{package}: --agent runs the episodes of an IE package; this one is not (its "
                             "manifest does not say track ie)")
        else:
            pkg = load_package(package)
            specs = [parse_spec(m) for m in models]  # every spec checked before any model is asked

        def progress(model: str, done: int, total: int) -> None:
            if not as_json:
                click.echo(f"  {model}: {done}/{total} items", err=True)

        options = EvalOptions(store_dir=Path(store) if store else None, limit=limit, progress=progress)
        reports, errors = [], []
        for spec in specs:
            try:
                reports.append(evaluate(pkg, spec, options))
            except ModelError as exc:
                if len(specs) == 1:
                    raise
                errors.append({"model": spec.spec, "error": str(exc)})
                click.echo(f"forge: error: {exc}", err=True)
        _emit({"reports": reports, "errors": errors}, as_json,
              lambda r: click.echo("\n\n".join(render(x) for x in r["reports"])))
        if errors:
            sys.exit(1)
    _guard(run)


if __name__ == "__main__":
    main()
