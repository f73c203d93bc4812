"""Contract checks of a package: every file it lists resolves to an intact blob, and gate E's
records are a complete response matrix."""

from __future__ import annotations

from forge.artifact_types import Package
from forge.contracts import CheckContext, Outcome, check


@check("package_resolvable")
def package_resolvable(pkg: Package, ctx: CheckContext) -> Outcome:
    """Every file resolves to a stored blob and the manifest lists every other file."""
    import json

    # Present is what this requirement asks; export checks every file's bytes as it copies them.
    missing = [p for p, h in pkg.files.items() if not ctx.store.blob_path(h).exists()]
    manifest = json.loads(ctx.store.get_blob(pkg.manifest))
    listed = set(manifest["files"])
    expected = set(pkg.files) - {"manifest.json"}
    problems = []
    if missing:
        problems.append(f"missing blobs for {missing[:3]}")
    if listed != expected:
        problems.append("manifest does not list exactly the package files")
    if next(iter(manifest)) != "format_version":
        problems.append("manifest does not start with format_version")
    for listing, count in (("items.jsonl", "items"), ("tasks.jsonl", "tasks")):  # what the track releases
        if listing in pkg.files:
            lines = ctx.store.get_blob(pkg.files[listing]).decode().count("\n")
            if lines != pkg.counts.get(count):
                problems.append(f"{listing} has {lines} lines, counts say {pkg.counts.get(count)}")
    return Outcome(not problems, "; ".join(problems))


@check("response_matrix_complete")
def response_matrix_complete(pkg: Package, ctx: CheckContext) -> Outcome:
    """Gate E's records: every panel member answered every released item once, each response
    attributed to a model id and scored in [0, 1], an invalid one scored 0."""
    import json

    from forge_skills.package.panel import iter_responses, matrix_problems
    from forge_skills.package.report_data import PANEL_FILE, RESPONSES_FILE

    if RESPONSES_FILE not in pkg.files:
        return Outcome(True, "no panel records (the package is not assessed yet)")
    try:
        panel = json.loads(ctx.store.get_blob(pkg.files[PANEL_FILE]))
        listing, key = ("items.jsonl", "id") if "items.jsonl" in pkg.files else ("tasks.jsonl", "task_id")
        items = [json.loads(line)[key] for line in ctx.store.get_blob(pkg.files[listing]).decode().splitlines()
                 if line.strip()]
        problems = matrix_problems(panel.get("members", []), items,
                                   iter_responses(ctx.store.get_blob(pkg.files[RESPONSES_FILE])))
    except (KeyError, ValueError) as exc:
        return Outcome(False, f"panel records unreadable: {type(exc).__name__}: {exc}")
    return Outcome(not problems, "; ".join(problems[:5]))
