"""The synthesizer role: templates for (capability, question type) pairs the library lacks, and
more realizations for library templates, written by a model and checked before they are kept.

One model question per missing pair (and one per template for realizations), never per item.
A template the model proposes goes through what every library template goes through before it
is written: the :class:`TemplateFile` schema and ``read_template``'s checks, the template contract
(``template_declares``: rule, slots, options, scoring, layout, at least four distinct
realizations), a wording check of each realization filled with sample names (ends as a question,
4-40 words, number agreement, nothing internal shown), and for a ``program`` answer rule a dry
run of its code in the sandbox on a sample scene (``candidates`` and ``derive`` must agree). What
fails goes back to the model with the problems, a bounded number of times; the client's own
validation retry handles replies that do not fit the output schema. Written templates still pass
the contracts and the grey batch of the build like any other.

Without a synthesizer model (the built-in backend) nothing is written, and the result says so.
"""

from __future__ import annotations

import functools
import json
import re
import string
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field

from forge.errors import DefinitionError
from forge.vocabulary import capabilities, question_types
from forge_skills.oe.synthesize.admission import SINGULAR
from forge_skills.oe.synthesize.answer_rules import RULES
from forge_skills.oe.synthesize.rules_program import dry_run, sample_view
from forge_skills.oe.synthesize.rules_scene import plural
from forge_skills.oe.synthesize.templates import TemplateFile, libraries, read_template, template_refs
from forge_skills.oe.synthesize.wording import agreement_problems

ROLE = "synthesizer"
STAGE = "S4"
MAX_ROUNDS = 3  # proposals per missing pair (or per template's realizations), the first included
MIN_WORDS, MAX_WORDS = 4, 40


# -- what the model returns -------------------------------------------------------------------------


class TemplateDraft(BaseModel):
    """A template's fields, as the model proposes them (the YAML file it becomes)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="a new lower_snake_case id")
    version: int = 1
    capability: str
    question_type: str
    scope: Literal["view", "scene"] = Field(description="view: one image per item; scene: several views")
    slots: dict[str, dict[str, Any]] = Field(description="slot name -> {kind: object | object_set (count) | "
                                                         "category | view_pair | frame_window}")
    answer_rule: dict[str, Any] = Field(description="{rule: <registered rule>, ...} or a program rule")
    admission: dict[str, Any] = Field(default_factory=dict, description="thresholds: min_visible_pixels, "
                                                                          "min_margin, same_category...")
    visibility: dict[str, Any] = Field(default_factory=dict, description="slot -> {in: view, min_pixels, "
                                                                           "max_truncation}")
    options: dict[str, Any] = Field(description="{kind: yes_no | objects | fixed | intervals | labels | views | "
                                                "frames | none | matching}")
    realizations: list[str] = Field(min_length=1, description="question wordings naming slots as {slot}")
    media: dict[str, Any] = Field(description="{layout: single_view | multi_view | frames | first_last | "
                                              "top_down_forward, markers: false}")
    scoring: dict[str, Any] = Field(description="{protocol: <the question type's protocol>}")
    max_per_evidence: int = Field(2, ge=1, le=50)


class MoreRealizations(BaseModel):
    """New wordings of one template's question."""

    model_config = ConfigDict(extra="forbid")

    realizations: list[str] = Field(min_length=1)


# -- context and results --------------------------------------------------------------------------


@dataclass(frozen=True)
class SynthesisContext:
    """What the synthesizer writes for: the sources' kinds, their template families, and the
    library templates of those families (examples for the prompt)."""

    source_kinds: tuple[str, ...]
    families: tuple[str, ...]
    example_paths: tuple[Path, ...]

    @classmethod
    def for_sources(cls, kinds: Sequence[str]) -> "SynthesisContext":
        from forge.resources import descriptor

        families = tuple(sorted({f for k in kinds for f in descriptor(k).templates}))
        refs = template_refs(list(families), [])
        return cls(tuple(dict.fromkeys(kinds)), families, tuple(p for _, (_, p) in sorted(refs.items())))

    @classmethod
    def for_intent(cls, loaded: Any) -> "SynthesisContext":
        return cls.for_sources([s.kind for s in loaded.intent.sources])


class SynthesisResult(list):
    """The paths written (a list), with ``failures`` (what could not be written, and why) and
    ``notes`` (what the caller should report)."""

    def __init__(self, paths: Sequence[Path] = (), failures: dict[str, str] | None = None,
                 notes: Sequence[str] = ()) -> None:
        super().__init__(paths)
        self.failures: dict[str, str] = dict(failures or {})
        self.notes: list[str] = list(notes)


BUILTIN_NOTE = "no synthesizer model is configured: the built-in synthesizer writes no templates or realizations"


def library_ids() -> set[str]:
    """Ids of every template of every registered library (a written template must not reuse one)."""
    return {p.stem for root in libraries().values() for p in root.glob("*/*.yaml")}


# -- templates for missing pairs ------------------------------------------------------------------


def write_templates(missing: list[tuple[str, str]], context: SynthesisContext, client: Any, role: Any,
                    folder: Path) -> SynthesisResult:
    """One template per missing (capability, question type) pair, written into ``folder`` as
    ``<id>.yaml``; ``role`` is the synthesizer's ModelRole (None: the built-in, which writes
    nothing). Pairs whose proposals stayed invalid are in ``failures``."""
    if role is None:
        return SynthesisResult([], {f"{c}/{q}": BUILTIN_NOTE for c, q in missing}, [BUILTIN_NOTE])
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    taken = library_ids()
    written, failures = [], {}
    for cap, qt in missing:
        messages = _template_prompt(cap, qt, context)
        problems: list[str] = []
        for _ in range(MAX_ROUNDS):
            answer = client.ask(ROLE, role, messages, TemplateDraft, stage=STAGE, artifact=f"template:{cap}/{qt}")
            draft: TemplateDraft = answer.output
            data = draft.model_dump()
            data["id"] = _free_id(data["id"], cap, qt, taken)
            problems = template_problems(data, cap, qt)
            if not problems:
                path = folder / f"{data['id']}.yaml"
                path.write_text(dump_template(data))
                taken.add(data["id"])
                written.append(path)
                break
            messages = messages + [
                {"role": "assistant", "content": draft.model_dump_json()},
                {"role": "user", "content": "That template was rejected:\n" + "\n".join(f"- {p}" for p in problems)
                                            + "\nReply with the whole corrected template as one JSON object."}]
        else:
            failures[f"{cap}/{qt}"] = f"{MAX_ROUNDS} proposals were invalid; the last: " + "; ".join(problems)
    return SynthesisResult(written, failures)


def _free_id(proposed: str, cap: str, qt: str, taken: set[str]) -> str:
    base = proposed if re.fullmatch(r"[a-z][a-z0-9_]*", proposed or "") else re.sub(r"[^a-z0-9_]", "_", f"{cap}_{qt}")
    if base not in taken:
        return base
    k = 1
    while f"{base}_gen{'' if k == 1 else k}" in taken:
        k += 1
    return f"{base}_gen{'' if k == 1 else k}"


def template_problems(data: dict[str, Any], cap: str | None = None, qt: str | None = None, *,
                      wording: bool = True) -> list[str]:
    """Why a proposed template may not be written (empty when it may). ``wording``: check every
    realization's wording too (off for overlays, whose new realizations were checked alone)."""
    from forge_skills.oe.types import Template
    from forge_skills.oe.verify.checks import template_declares

    problems = []
    if cap is not None and data.get("capability") != cap:
        problems.append(f"capability must be {cap!r}, not {data.get('capability')!r}")
    if qt is not None and data.get("question_type") != qt:
        problems.append(f"question_type must be {qt!r}, not {data.get('question_type')!r}")
    with tempfile.TemporaryDirectory(prefix="forge-template-") as tmp:
        path = Path(tmp) / f"{data.get('id')}.yaml"
        path.write_text(dump_template(data))
        try:
            tpl = read_template(path)
        except DefinitionError as exc:
            return problems + [str(exc.message).replace(str(path), "the template")]
    try:
        outcome = template_declares(Template(**tpl.model_dump(), file="synthesizer", file_hash=""), None)
        if not outcome.passed:
            problems += [p.strip() for p in outcome.diagnostics.split("; ") if p.strip()]
    except (KeyError, ValueError) as exc:
        problems.append(str(exc.args[0] if exc.args else exc))
    if wording:
        problems += realization_problems(tpl.model_dump())
    if not problems and tpl.answer_rule.get("rule") == "program":
        problems += dry_run(tpl.model_dump())
    return problems


def dump_template(data: dict[str, Any]) -> str:
    """The template as YAML in TemplateFile's field order, code as a literal block."""
    order = list(TemplateFile.model_fields)
    ordered = {k: data[k] for k in order if k in data}
    ordered.update({k: v for k, v in data.items() if k not in ordered})
    return yaml.dump(ordered, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=110)


class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


# -- wording --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _nouns() -> tuple[frozenset[str], frozenset[str]]:
    cats = {o["category"] for o in sample_view()["objects"]}
    try:
        from forge_resources.pybullet_sim import catalogue

        cats |= set(catalogue()["categories"])
    except Exception:  # a catalogue that cannot be read: the sample's nouns suffice
        pass
    singulars = frozenset({c.replace("-", " ") for c in cats} | {"object"})
    return singulars, frozenset(plural(c) for c in singulars)


def _fill(slots: dict[str, Any]) -> dict[str, str]:
    names = [o["name"] for o in sample_view()["objects"]]
    out: dict[str, str] = {}
    k = 0
    for slot, spec in slots.items():
        kind = (spec or {}).get("kind") if isinstance(spec, dict) else None
        if kind == "category":
            out[slot], out[f"{slot}{SINGULAR}"] = "cubes", "cube"
        elif kind in ("object_set", "object_pair"):
            out[slot] = f"{names[k % len(names)]} and {names[(k + 1) % len(names)]}"
            k += 2
        elif kind in ("view_pair", "view", "frame_window"):
            out[slot] = "View 1"
        else:
            out[slot] = names[k % len(names)]
            k += 1
    return out


def _placeholders(text: str) -> frozenset[str]:
    try:
        return frozenset(f for _, f, _, _ in string.Formatter().parse(text) if f is not None)
    except ValueError:
        return frozenset({"<malformed>"})


def wording_problems(text: str, slots: dict[str, Any]) -> list[str]:
    """What is wrong with one realization once its slots are filled with sample names."""
    from forge_skills.oe.verify.item_checks import _HIDDEN

    try:
        filled = text.format(**_fill(slots))
    except (KeyError, IndexError, ValueError) as exc:
        return [f"realization {text!r} names {exc} which is not a slot (slots: {sorted(slots)})"]
    problems = []
    words = filled.split()
    if not filled.strip().endswith(("?", ".")):
        problems.append(f"realization {text!r} does not end as a question or an instruction")
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        problems.append(f"realization {text!r} has {len(words)} words (between {MIN_WORDS} and {MAX_WORDS})")
    if re.search(r"\b(\w+) \1\b", filled, re.I):
        problems.append(f"realization {text!r} repeats a word")
    leak = _HIDDEN.search(filled)
    if leak:
        problems.append(f"realization {text!r} shows {leak.group(0)!r}, which items may not show")
    singulars, plurals = _nouns()
    problems += [f"realization {text!r}: {p}" for p in agreement_problems(filled, set(singulars), set(plurals))]
    return problems


def realization_problems(tpl: dict[str, Any]) -> list[str]:
    return [p for text in tpl["realizations"] for p in wording_problems(text, tpl["slots"])]


# -- prompts --------------------------------------------------------------------------------------

SYSTEM = ("You write question templates for forge, which builds embodied-AI benchmarks from simulator "
          "ground truth. A template turns registered evidence (objects and what each view shows of them) into "
          "questions whose answers follow from that evidence alone. Reply with one JSON object.")

PROGRAM_GUIDE = """A program rule (when no registered rule computes the answer):
answer_rule: {rule: program, quantity: <what the answer is a function of, e.g. field:visible_pixels>,
  slots: [<exactly the template's slot names>], question_types: [<this question type>],
  whole_order: <true when the answer orders all its referents>, code: <Python source>}
The code (standard library: math, statistics, itertools, collections, ...; no files, network or processes)
defines candidates(evidence, view, template) -> [{"slots": {...}, "answer": str, "margin": float}, ...]
(admissible slot fillings for view index `view` with a margin: how clearly the evidence separates the
answer) and derive(evidence, view, slots, template) -> str or None (None: the evidence does not settle it);
derive must give back each candidate's answer. `template` is the template without the code.
evidence = {"views": [{"index", "width", "height", "role", "camera_position"}],
  "objects": [{"name", "category", "colour", "referable", "position", "box_3d": {"min", "max"}, "attributes"}],
  "facts": {<object name>: {<str(view index)>: {"visible_pixels", "bbox_2d", "center_2d", "median_depth",
  "truncation", "in_frustum"}}}}  (bbox/centre in pixels, depth in metres; null when not visible).
Only referable objects may be named; keep a margin threshold in `admission` and use it."""


def _rules_text(qt: str) -> str:
    lines = []
    for name, rule in sorted(RULES.items()):
        if rule.for_template is not None:
            continue
        mark = "  <- answers this question type" if qt in rule.question_types else ""
        lines.append(f"- {name}: slots {list(rule.slots)}, question types {list(rule.question_types)}{mark}")
    return "\n".join(lines)


def _examples(cap: str, qt: str, context: SynthesisContext, k: int = 2) -> list[str]:
    rows = []
    for path in context.example_paths:
        try:
            tpl = read_template(path)
        except DefinitionError:
            continue
        rows.append((path, tpl))
    chosen: list[Path] = []
    for want in (lambda t: t.question_type == qt, lambda t: t.capability == cap, lambda t: True):
        for path, tpl in rows:
            if len(chosen) < k and path not in chosen and want(tpl):
                chosen.append(path)
                break
    return [p.read_text() for p in chosen]


def _template_prompt(cap: str, qt: str, context: SynthesisContext) -> list[dict[str, str]]:
    c = capabilities()[cap]
    q = question_types()[qt]
    examples = "\n---\n".join(_examples(cap, qt, context))
    user = (f"Write one new template for the capability {cap!r} ({c.description}) asked as the question type "
            f"{qt!r} ({q.description}; option kinds {list(q.option_kinds)}; scoring protocol {q.protocol!r}), "
            f"for sources of kind {', '.join(context.source_kinds)} (template families "
            f"{', '.join(context.families)}).\n\n"
            f"Library templates of these sources, as examples of the format:\n{examples}\n\n"
            f"Registered answer rules:\n{_rules_text(qt)}\n\n{PROGRAM_GUIDE}\n\n"
            "Requirements: at least 4 distinct realizations, each naming slots only as {slot} (the slots the "
            "question shows), ending with '?', grammatical for any object name; visibility and admission "
            "thresholds so that a person can see the answer in the image; nothing the question text alone "
            "gives away (answers must need the image).")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


# -- extra realizations ---------------------------------------------------------------------------


def extra_realizations(paths: list[Path], n: int, client: Any, role: Any, folder: Path) -> SynthesisResult:
    """Overlay copies of library templates (same id, same file name) in ``folder``, each with up to
    ``n`` more realizations from the model that keep exactly the template's slot placeholders and
    pass the wording checks. One question per template (asked as one batch); invalid proposals go
    back once more per round, up to MAX_ROUNDS."""
    from forge.models.client import Question

    if role is None:
        return SynthesisResult([], {str(p): BUILTIN_NOTE for p in paths}, [BUILTIN_NOTE])
    if n <= 0 or not paths:
        return SynthesisResult()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    templates = [(Path(p), read_template(Path(p))) for p in paths]
    conversations = [_realization_prompt(t, n) for _, t in templates]
    answers = client.ask_many(ROLE, role, [Question(m, f"realizations:{t.id}") for m, (_, t) in
                                           zip(conversations, templates)], MoreRealizations, stage=STAGE)
    written, failures = [], {}
    for (path, tpl), messages, answer in zip(templates, conversations, answers):
        kept: list[str] = []
        problems: list[str] = []
        for round_ in range(MAX_ROUNDS):
            proposals = answer.output.realizations
            good, problems = _check_new(proposals, tpl, kept)
            kept += good[: n - len(kept)]
            if len(kept) >= n or round_ == MAX_ROUNDS - 1:
                break
            messages = messages + [
                {"role": "assistant", "content": answer.output.model_dump_json()},
                {"role": "user", "content": f"Kept {len(kept)} of {n}. Rejected:\n" + "\n".join(f"- {p}" for p in problems)
                                            + f"\nReply with {n - len(kept)} more realizations."}]
            answer = client.ask(ROLE, role, messages, MoreRealizations, stage=STAGE, artifact=f"realizations:{tpl.id}")
        if not kept:
            failures[tpl.id] = "no proposed realization was valid: " + "; ".join(problems[:5])
            continue
        data = tpl.model_dump()
        data["realizations"] = list(tpl.realizations) + kept
        final = template_problems(data, wording=False)
        if final:
            failures[tpl.id] = "; ".join(final)
            continue
        out = folder / path.name
        out.write_text(dump_template(data))
        written.append(out)
        if len(kept) < n:
            failures[tpl.id] = f"only {len(kept)} of {n} realizations were valid: " + "; ".join(problems[:3])
    return SynthesisResult(written, failures)


def _check_new(proposals: list[str], tpl: TemplateFile, kept: list[str]) -> tuple[list[str], list[str]]:
    allowed = {_placeholders(r) for r in tpl.realizations}
    seen = {r.strip().lower() for r in [*tpl.realizations, *kept]}
    good, problems = [], []
    for text in proposals:
        text = text.strip()
        marks = _placeholders(text)
        if marks not in allowed:
            want = " or ".join(sorted("{" + ", ".join(sorted(a)) + "}" for a in allowed))
            problems.append(f"{text!r} uses placeholders {sorted(marks)}; it must use exactly {want}")
            continue
        if text.lower() in seen:
            problems.append(f"{text!r} repeats an existing realization")
            continue
        wrong = wording_problems(text, tpl.slots)
        if wrong:
            problems += wrong
            continue
        seen.add(text.lower())
        good.append(text)
    return good, problems


def _realization_prompt(tpl: TemplateFile, n: int) -> list[dict[str, str]]:
    shown = json.dumps({"capability": tpl.capability, "question_type": tpl.question_type, "slots": tpl.slots,
                        "options": tpl.options, "realizations": tpl.realizations}, indent=1)
    user = (f"Here is a question template:\n{shown}\n\nWrite {n} new realizations: different wordings of the "
            "same question, each with exactly the placeholders the existing ones use (in braces), ending with "
            "'?', natural and unambiguous, not repeating an existing one.")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


__all__ = ["MoreRealizations", "SynthesisContext", "SynthesisResult", "TemplateDraft", "extra_realizations",
           "library_ids", "template_problems", "wording_problems", "write_templates"]
