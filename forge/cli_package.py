"""forge's package commands: re-verify and verify a package, review its items, report on it and
evaluate models or agents on it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from forge.cli_support import emit, guarded, store_for
from forge.errors import UsageError


@click.command()
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
        from forge.store import DB_NAME, Store
        from forge.tracks import default_track

        target = Path(package)
        if not (target / "manifest.json").exists():
            raise UsageError(f"{target}: not a package (no manifest.json)")
        try:
            track_name = json.loads((target / "manifest.json").read_text()).get("track", default_track())
        except (OSError, ValueError, AttributeError):
            track_name = default_track()
        reverify_package = lookup("reverifier", track_name)
        store_dir = store_for(store, intent)
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
        emit(report, as_json, render)
        if report["invalid"] or problems:
            sys.exit(1)
    guarded(run)


def _package_item_ids(package: Path) -> list[str]:
    from forge.verify import _item_ids

    return _item_ids(package)


@click.command()
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

        store_dir = Path(store) if store else (store_for(None, intent) if intent else None)

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
        emit(report, as_json, render)
        if not report["ok"]:
            sys.exit(1)
    guarded(run)


@click.command()
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
            emit(result, as_json, lambda r: click.echo(
                f"{r['imported']} verdicts by {r['reviewer']}: {r['correct']} correct, {r['ambiguous']} ambiguous, "
                f"{r['wrong']} wrong, {r['trivial']} marked trivial; {r['routed_to_repair']} item(s) go to diagnosis "
                f"and repair on the next `forge build`"))
            return
        if not package:
            raise UsageError("give a PACKAGE to review, or --import FILE --store DIR")
        page = rv.write_page(Path(package), Path(out) if out else None, count, seed, Path(store) if store else None)
        emit({"page": str(page)}, as_json, lambda r: click.echo(f"review page: {r['page']} (open it in a browser, "
                                                                  "mark the items, save the verdicts)"))
    guarded(run)


@click.command()
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
        emit({"report": str(target), "numbers": numbers}, as_json,
              lambda r: click.echo(f"report: {r['report']} ({len(r['numbers']['models'])} panel members, "
                                   f"{r['numbers']['package']['items']} items, "
                                   f"{len(r['numbers']['irt']['flagged'])} items flagged by IRT)"))
    guarded(run)


@click.command("eval")
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
        from forge.evaluation.run import track_evaluator
        from forge.models import ModelError

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
        emit({"reports": reports, "errors": errors}, as_json,
              lambda r: click.echo("\n\n".join(render(x) for x in r["reports"])))
        if errors:
            sys.exit(1)
    guarded(run)


PACKAGE_COMMANDS = (reverify, verify, review, report, eval_)
