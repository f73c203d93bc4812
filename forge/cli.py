"""The ``forge`` command line. User errors print one clear message (no traceback) and exit
with the error's code; ``--json`` prints machine-readable output on stdout."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from forge.errors import StoreError, UsageError
from forge.cli_catalogue import CATALOGUE_COMMANDS
from forge.cli_package import PACKAGE_COMMANDS
from forge.cli_support import emit, guarded, store_for


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
        emit(summary, as_json, _print_summary)
        _exit_if_short(summary)
    guarded(run)


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

        store_dir = store_for(store, intent)
        intent_path = intent
        if intent_path is None:
            with Store(store_dir, read_only=True) as s:
                row = s.one("SELECT intent_path FROM builds ORDER BY started_at DESC LIMIT 1")
            if row is None:
                raise StoreError(f"{store_dir}: no build recorded; give the intent file")
            intent_path = row[0]
        summary = do_build(intent_path, _build_options(str(store_dir), out, workers, quiet, as_json, [ref]))
        emit(summary, as_json, _print_summary)
        _exit_if_short(summary)
    guarded(run)


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

        with Store(store_for(store, intent), read_only=True) as s:
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
        emit(report, as_json, render)
    guarded(run)


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

        with Store(store_for(store, intent), read_only=True) as s:
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
        emit(report, as_json, render)
    guarded(run)


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

        store_dir = store_for(store, intent)
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
        emit(report, as_json, render)
        if report["unrepaired"]:
            sys.exit(1)
    guarded(run)


for _command in (*CATALOGUE_COMMANDS, *PACKAGE_COMMANDS):
    main.add_command(_command)


if __name__ == "__main__":
    main()
