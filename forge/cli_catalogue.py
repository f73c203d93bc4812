"""forge's catalogue commands: the registered skills, resources, templates and capabilities, and
the intent schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from forge.cli_support import emit, guarded
from forge.errors import UsageError


@click.command()
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
        emit(rows, as_json, render)
    guarded(run)


@click.command()
@click.option("--json", "as_json", is_flag=True)
def resources(as_json: bool) -> None:
    """Sources and simulators known here, and whether each is available on this machine."""
    def run() -> None:
        from forge.resources import describe

        def render(rs: list[dict[str, Any]]) -> None:
            for r in rs:
                mark = "available" if r["available"] else f"unavailable: {r['reason']}"
                click.echo(f"{r['kind']:<22} track {r['track']}  {mark}\n      {r['description']}")
        emit(describe(), as_json, render)
    guarded(run)


@click.command()
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
        emit(rows, as_json, render)
    guarded(run)


@click.command()
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
        emit(rows, as_json, render)
    guarded(run)


@click.command("intent-schema")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write to this file instead of stdout")
def intent_schema(output: str | None) -> None:
    """Write the JSON schema of intent.yaml (for editor validation)."""
    from forge.intent import intent_json_schema

    text = json.dumps(intent_json_schema(), indent=2)
    if output:
        Path(output).write_text(text + "\n")
    else:
        click.echo(text)


CATALOGUE_COMMANDS = (skills, resources, templates, capabilities, intent_schema)
