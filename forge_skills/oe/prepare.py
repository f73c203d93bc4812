"""Before planning, the OE track may ask two model roles: the coordinator chooses capabilities for
an intent that describes what to evaluate in free text, and the synthesizer writes templates for
asked (capability, question type) pairs the library lacks (and, when asked, more realizations of
the library's). Both answers are checked by the same type checker as any intent: a proposal that
does not compose goes back to the model with the error.

Without a coordinator the capability catalogue maps the free text (its built-in backend); without
a synthesizer a missing pair stops the build with the compatible pairs listed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from forge.errors import CompositionError, IntentError
from forge.intent import LoadedIntent, load_intent
from forge.keys import digest
from forge.models.config import ModelRole, ModelRoles
from forge.vocabulary import capabilities

MAX_PROPOSALS = 3  # a coordinator's proposal and its corrections
GENERATED = "generated_templates"  # in the store folder: what the synthesizer wrote


class CapabilityProposal(BaseModel):
    """The coordinator's choice for the intent's free text."""

    capabilities: list[str] = Field(min_length=1, description="registered capability names")
    rationale: str = Field("", description="one sentence: why these capabilities fit the text")


def asks_before_planning(raw: dict[str, Any]) -> bool:
    roles = _roles(raw)
    if roles is None:
        return False
    oe = raw.get("oe") if isinstance(raw.get("oe"), dict) else {}
    wants_coordinator = roles.coordinator is not None and bool(oe.get("focus")) and not oe.get("capabilities")
    return wants_coordinator or roles.synthesizer is not None


def _roles(raw: dict[str, Any]) -> ModelRoles | None:
    models = raw.get("models")
    if not isinstance(models, dict):
        return None
    try:
        return ModelRoles.model_validate(models)
    except Exception:  # invalid: load_intent reports it with its line
        return None


def plan_with_models(path: Path, client: Any, store_root: Path, progress: Any) -> LoadedIntent:
    """The intent to plan, after the coordinator and the synthesizer had their say."""
    raw = _raw(path)
    roles = _roles(raw) or ModelRoles()
    chosen_by: dict[str, list[str]] = {}
    oe = raw.get("oe") or {}
    if roles.coordinator is not None and oe.get("focus") and not oe.get("capabilities"):
        progress.stage("S1 coordinator: choosing capabilities for the intent's focus")
        caps, why = coordinate(path, raw, client, roles.coordinator)
        raw = {**raw, "oe": {**oe, "capabilities": caps}}
        chosen_by = {c: [why] for c in caps}
    loaded = _with(load_intent(path, rewrite=lambda _: raw), chosen_by)
    if roles.synthesizer is None:
        return loaded
    folder = store_root / GENERATED
    written = synthesize(loaded, client, roles.synthesizer, folder, progress)
    if not written:
        return loaded
    dirs = list(raw.get("templates_dirs") or [])
    if str(folder) not in dirs:
        dirs.append(str(folder))
    raw = {**raw, "templates_dirs": dirs}
    return _with(load_intent(path, rewrite=lambda _: raw), chosen_by)


def _raw(path: Path) -> dict[str, Any]:
    from forge.intent import read_intent

    return read_intent(path)


def _with(loaded: LoadedIntent, chosen_by: dict[str, list[str]]) -> LoadedIntent:
    return loaded.model_copy(update={"chosen_by": chosen_by}) if chosen_by else loaded


def coordinate(path: Path, raw: dict[str, Any], client: Any, role: ModelRole) -> tuple[list[str], str]:
    """Capabilities for ``oe.focus`` proposed by the coordinator and type-checked; a proposal that
    does not check goes back with the error, up to ``MAX_PROPOSALS`` times."""
    oe = raw["oe"]
    catalogue = "\n".join(f"- {name}: {cap.description}" for name, cap in sorted(capabilities().items()))
    pairs = _offered_pairs(raw)
    messages: list[dict[str, str]] = [
        {"role": "system", "content": "You compose embodied-AI benchmarks. Choose the capabilities a benchmark "
                                      "should test for a researcher's description. Answer in JSON."},
        {"role": "user", "content": f"Description: {oe['focus']}\n\nCapabilities:\n{catalogue}\n\n"
                                    f"Question types asked: {', '.join(oe.get('question_types') or [])}\n"
                                    f"(capability, question type) pairs the sources' templates offer: "
                                    f"{', '.join(f'{c}/{q}' for c, q in pairs)}\n\n"
                                    "Pick only capabilities that fit the description and that some asked "
                                    "question type can test."},
    ]
    artifact = f"intent:{digest({k: v for k, v in raw.items() if k != 'models'})}"
    problem = ""
    for attempt in range(MAX_PROPOSALS):
        answer = client.ask("coordinator", role, messages, CapabilityProposal, stage="S1", artifact=artifact)
        proposal: CapabilityProposal = answer.output
        try:
            _check(path, raw, proposal.capabilities)
            return list(dict.fromkeys(proposal.capabilities)), \
                f"coordinator {answer.model}: {proposal.rationale or 'chosen for the focus text'}"
        except (IntentError, CompositionError) as exc:
            problem = str(exc)
            messages = messages + [
                {"role": "assistant", "content": proposal.model_dump_json()},
                {"role": "user", "content": f"That choice does not type-check:\n{problem}\nPropose again."}]
    raise CompositionError(f"{path}: the coordinator's proposals for oe.focus did not type-check after "
                           f"{MAX_PROPOSALS} attempts; the last problem: {problem}",
                           hint="list oe.capabilities explicitly, or use a stronger coordinator model")


def _check(path: Path, raw: dict[str, Any], caps: list[str]) -> None:
    """The proposal validated and composed as if the researcher had written it."""
    from forge.planner import compose
    from forge.skills import discover

    proposed = {**raw, "oe": {**raw["oe"], "capabilities": list(dict.fromkeys(caps))}}
    compose(load_intent(path, rewrite=lambda _: proposed), discover())


def _offered_pairs(raw: dict[str, Any]) -> list[tuple[str, str]]:
    from forge.registry import lookup
    from forge.resources import descriptor

    kinds = [s.get("kind") for s in raw.get("sources") or [] if isinstance(s, dict)]
    families: set[str] = set()
    for kind in kinds:
        try:
            families.update(descriptor(kind).templates)
        except Exception:  # an unknown kind: validation names it
            continue
    rows = lookup("template_catalogue", "builtin")(sorted(families), [])
    return sorted({(r["capability"], r["question_type"]) for r in rows})


def synthesize(loaded: LoadedIntent, client: Any, role: ModelRole, folder: Path, progress: Any) -> list[Path]:
    """Templates for the asked pairs no template offers, and extra realizations when asked."""
    from forge_skills.oe.synthesizer import SynthesisContext, extra_realizations, write_templates
    from forge_skills.oe.compatibility import missing_pairs

    written: list[Path] = []
    missing = missing_pairs(loaded)
    context = SynthesisContext.for_intent(loaded)
    if missing:
        progress.stage(f"S4 synthesizer: writing templates for {', '.join(f'{c}/{q}' for c, q in missing)}")
        result = write_templates(missing, context, client, role, folder)
        for line in [*result.notes, *(f"{pair}: {why}" for pair, why in result.failures.items())]:
            progress.stage(f"   {line}")
        written += list(result)
    extra = int(getattr(loaded.intent.oe, "extra_realizations", 0) or 0)
    if extra:
        from forge.planner import available_templates

        library = [Path(r["path"]) for r in available_templates(loaded) if not r["label"].startswith("dir:")]
        progress.stage(f"S4 synthesizer: {extra} more realizations for {len(library)} templates")
        written += list(extra_realizations(library, extra, client, role, folder))
    return written
