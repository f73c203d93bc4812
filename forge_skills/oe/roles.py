"""What the OE track asks its model roles after planning, per template and never per item:

- verifier: reads a template's grey batch (question, options, key; the media for a vision model)
  and says which items are inconsistent or ambiguous. Its verdicts are model-assisted records; a
  template whose grey batch it fails is held back like one failing gate A. It can only add
  failures: an item a deterministic check failed never reaches it.
- panel: answers a sample of each template's items without media (another blind solver: a panel
  member that beats chance without the picture has found a shortcut) and, for vision members,
  with media (the full condition of C1 and its gap over the blind condition).
- judges: score a sample of each template's items and the benchmark as a whole on the eight
  rubric dimensions; each judge is stored apart and the package reports their average.

With no model configured each role has a built-in backend, named in what it writes.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, Field

from forge_skills.oe.types import OEItem
from forge.models.errors import ModelOutputError
from forge.models.roles import RoleContext
from forge_skills.oe.verify.blind_chance import _key, binomial_tail

PANEL_BLIND_SAMPLE = 12  # items per template the panel answers without media
PANEL_FULL_SAMPLE = 8  # ... and with media (vision members)
JUDGE_SAMPLE = 3  # items per template each judge scores
DIMENSIONS = ("UIA", "FSQ", "QAC", "EGC", "SGC", "AFC", "TSD", "SSC")
# Weights of the rubric's overall score; AFC's weight is dropped where it does not apply.
WEIGHTS = {"UIA": 0.12, "FSQ": 0.12, "QAC": 0.14, "EGC": 0.18, "SGC": 0.16, "AFC": 0.10, "TSD": 0.10, "SSC": 0.08}


# -- output types -----------------------------------------------------------------------------

class Verdict(BaseModel):
    id: str
    consistent: bool = Field(description="the key answers the question and is among the options")
    ambiguous: bool = Field(description="another option could also be right, or the question is unclear")
    reason: str = ""


class Verdicts(BaseModel):
    items: list[Verdict]


class PanelAnswer(BaseModel):
    id: str
    answer: str


class PanelAnswers(BaseModel):
    answers: list[PanelAnswer]


class SingleAnswer(BaseModel):
    answer: str


Score = Field(ge=0, le=100)


class ItemRubric(BaseModel):
    id: str
    UIA: float = Score
    FSQ: float = Score
    QAC: float = Score
    EGC: float = Score
    SGC: float = Score
    AFC: float | None = Field(None, ge=0, le=100, description="null when no action or affordance is involved")
    TSD: float = Score
    SSC: float = Score


class ItemRubrics(BaseModel):
    items: list[ItemRubric]


class BenchmarkRubric(BaseModel):
    UIA: float = Score
    FSQ: float = Score
    QAC: float = Score
    EGC: float = Score
    SGC: float = Score
    AFC: float | None = Field(None, ge=0, le=100)
    TSD: float = Score
    SSC: float = Score
    summary: str = ""


# -- prompts ----------------------------------------------------------------------------------

def item_text(iid: str, it: OEItem, *, key: bool) -> str:
    options = "\n".join(f"  {chr(65 + i)}. {o}" for i, o in enumerate(it.options)) if it.options else "  (no options)"
    stated = f" [{it.instruction}]" if it.instruction else ""
    lines = [f"[{iid}] ({it.capability}, {it.question_type}) {it.question}{stated}", options,
             f"  response format: {it.response_format}"]
    if key:
        lines.append(f"  key: {it.answer}")
    return "\n".join(lines)


def _sample(ids: list[str], n: int) -> list[str]:
    return sorted(ids)[:n]  # ids are content digests: the first n are a fixed, unbiased draw


def _images(store: Any, it: OEItem) -> list[bytes]:
    return [store.get_blob(m.blob) for m in it.media]


# -- verifier ---------------------------------------------------------------------------------

def verify_grey_batch(models: RoleContext, store: Any, template: str, items: dict[str, OEItem]) -> dict[str, str]:
    """Item id -> why the verifier fails it (consistency or ambiguity), for a template's grey batch."""
    if not items:
        return {}
    role = models.single("verifier")
    models.note("verifier: question/answer consistency and ambiguity", "verifier", [role.model] if role else None)
    if role is None:
        return _builtin_verdicts(items)
    text = "\n\n".join(item_text(i, it, key=True) for i, it in sorted(items.items()))
    messages = [{"role": "system", "content": "You check benchmark items. For each item say whether its key is "
                                              "consistent with the question and options, and whether it is "
                                              "ambiguous. Answer in JSON."},
                {"role": "user", "content": f"Template {template}. Items:\n\n{text}"}]
    images = [img for _, it in sorted(items.items()) for img in _images(store, it)] if role.vision else []
    answer = models.client.ask("verifier", role, messages, Verdicts, stage="S4", artifact=f"template:{template}",
                               images=images)
    failed = {}
    for v in answer.output.items:
        if v.id in items and (not v.consistent or v.ambiguous):
            failed[v.id] = ("inconsistent" if not v.consistent else "ambiguous") + (f": {v.reason}" if v.reason else "")
    return failed


def _builtin_verdicts(items: dict[str, OEItem]) -> dict[str, str]:
    """The rules a verifier would apply that need no model: the key among the options (when
    there are options), no two options alike."""
    failed = {}
    for iid, it in items.items():
        if it.options and it.answer not in it.options and it.answer_indices is None and it.answer_value is None:
            failed[iid] = "inconsistent: the key is not among the options"
        elif len({o.strip().lower() for o in it.options}) < len(it.options):
            failed[iid] = "ambiguous: two options read the same"
    return failed


# -- panel (C1) -------------------------------------------------------------------------------

def panel_blind_and_full(models: RoleContext, store: Any, groups: dict[str, list[tuple[str, OEItem]]],
                         reports: dict[str, dict], score_item, settings: dict[str, Any]) -> set[str]:
    """Add the panel's answers to each template's C1 report; the templates a panel member answers
    well above chance without media are returned (held back as the blind solvers' are)."""
    members = models.members("panel")
    check = "C1 full condition and model blind solver (panel)"
    models.note(check, "panel", [m.model for m in members.values()] or None)
    if not members:
        return set()
    tested = {t: g for t, g in groups.items() if reports.get(t, {}).get("tested")}
    if not tested:
        models.note(check, "panel", [m.model for m in members.values()],
                    f"not asked: no template had the {settings['min_blind_items']} items (min_blind_items) "
                    "the blind test needs")
    flagged: set[str] = set()
    for template, group in sorted(tested.items()):
        report = reports[template]
        by_id = dict(group)
        blind_ids = _sample(list(by_id), PANEL_BLIND_SAMPLE)
        panel: dict[str, Any] = {}
        for name, role in members.items():
            text = "\n\n".join(item_text(i, by_id[i], key=False) for i in blind_ids)
            messages = [{"role": "system", "content": "Answer each question as its response format asks. You do not "
                                                      "see the images; give your best guess. Answer in JSON."},
                        {"role": "user", "content": text}]
            # A member whose replies stay invalid after its retries is reported for the template, not
            # fatal (as for judges): it is one blind solver among several.
            try:
                got = models.client.ask(name, role, messages, PanelAnswers, stage="S5",
                                        artifact=f"template:{template}:blind").output
            except ModelOutputError as exc:
                panel[name] = {"model": role.model, "invalid_reply": str(exc).split("\n")[0]}
                continue
            answers = {a.id: a.answer for a in got.answers}
            blind = sum(score_item(_key(by_id[i]), answers.get(i)) for i in blind_ids) / len(blind_ids)
            row: dict[str, Any] = {"model": role.model, "blind_items": len(blind_ids), "blind_accuracy": blind}
            if role.vision:
                full_ids = _sample(list(by_id), PANEL_FULL_SAMPLE)
                full = 0.0
                for i in full_ids:
                    msg = [{"role": "system", "content": "Answer the question about the images as its response format "
                                                         "asks. Answer in JSON."},
                           {"role": "user", "content": item_text(i, by_id[i], key=False)}]
                    out = models.client.ask(name, role, msg, SingleAnswer, stage="S5", artifact=i,
                                            images=_images(store, by_id[i])).output
                    full += score_item(_key(by_id[i]), out.answer)
                row.update({"full_items": len(full_ids), "full_accuracy": full / len(full_ids),
                            "gap": full / len(full_ids) - blind})
            panel[name] = row
            chance, n = report["chance"], len(blind_ids)
            p = min(1.0, binomial_tail(math.ceil(blind * n - 1e-9), n, chance) * (len(report["accuracies"]) + len(members)))
            if blind - chance > settings["blind_margin"] and p < settings["blind_alpha"]:
                flagged.add(template)
                row["flagged"] = True
        report["panel"] = panel
        fulls = [r["gap"] for r in panel.values() if "gap" in r]
        report["full_condition"] = (f"panel gap (with media minus without): {min(fulls):+.2f}" if fulls else
                                    "not evaluated: no vision panel member (text-only members act as blind solvers)")
    return flagged


# -- judges -----------------------------------------------------------------------------------

def judge(models: RoleContext, store: Any, accepted: dict[str, OEItem], blueprint: Any,
          blind_reports: dict[str, dict]) -> dict[str, Any]:
    """The rubric per judge (a sample per template, and the benchmark as a whole), and their
    average; the built-in judge scores only what rules can measure."""
    members = models.members("judges")
    models.note("quality rubric (judges)", "judges", [m.model for m in members.values()] or None)
    by_template: dict[str, list[str]] = {}
    for iid, it in accepted.items():
        by_template.setdefault(it.template, []).append(iid)
    samples = {t: _sample(ids, JUDGE_SAMPLE) for t, ids in sorted(by_template.items())}
    if not members:
        return {"judges": {"builtin": _builtin_rubric(samples, accepted, blind_reports)},
                "average": None, "note": "no judge model configured: rule-based scores only (FSQ, QAC, TSD)"}
    per_judge: dict[str, Any] = {}
    for name, role in members.items():
        items: dict[str, dict[str, Any]] = {}
        # A judge whose replies stay invalid after its retries is reported, not fatal: the rubric
        # is auxiliary. An unreachable endpoint still stops the build (the next run resumes).
        invalid: dict[str, str] = {}
        for template, ids in samples.items():
            text = "\n\n".join(item_text(i, accepted[i], key=True) for i in ids)
            messages = [{"role": "system", "content": _rubric_instructions()},
                        {"role": "user", "content": f"Template {template}. Score each item.\n\n{text}"}]
            images = [img for i in ids for img in _images(store, accepted[i])] if role.vision else []
            try:
                out = models.client.ask(name, role, messages, ItemRubrics, stage="S5", artifact=f"template:{template}",
                                        images=images).output
            except ModelOutputError as exc:
                invalid[f"template:{template}"] = str(exc).split("\n")[0]
                continue
            scored = [row for row in out.items if row.id in ids]
            if not scored:  # a well-formed reply about none of the items asked is no judgment either
                invalid[f"template:{template}"] = f"the reply scored none of the {len(ids)} items asked"
            for row in scored:
                items[row.id] = row.model_dump(exclude={"id"})
        overview = _benchmark_overview(blueprint, accepted, samples)
        try:
            bench = models.client.ask(name, role, [{"role": "system", "content": _rubric_instructions()},
                                                   {"role": "user", "content": overview}],
                                      BenchmarkRubric, stage="S5", artifact=f"benchmark:{blueprint.name}").output.model_dump()
        except ModelOutputError as exc:
            invalid[f"benchmark:{blueprint.name}"] = str(exc).split("\n")[0]
            bench = None
        per_judge[name] = {"model": role.model, "items": items, "item_means": _means(items.values()),
                           "benchmark": bench, "invalid_replies": invalid}
    return {"judges": per_judge, "average": _average(per_judge), "weights": WEIGHTS}


def _rubric_instructions() -> str:
    return ("You judge embodied-AI benchmark items on eight dimensions, each 0-100: UIA (fits the intended "
            "embodied capability), FSQ (format clear and usable), QAC (question, options and key consistent, one "
            "answer), EGC (the key is supported by the evidence), SGC (spatial relations correct), AFC (actions or "
            "affordances feasible; null when none are involved), TSD (needs the visual evidence, not language "
            "priors), SSC (a real challenge that separates models). Answer in JSON.")


def _benchmark_overview(blueprint: Any, accepted: dict[str, OEItem], samples: dict[str, list[str]]) -> str:
    caps: dict[str, int] = {}
    for it in accepted.values():
        caps[it.capability] = caps.get(it.capability, 0) + 1
    examples = "\n\n".join(item_text(ids[0], accepted[ids[0]], key=True) for ids in samples.values() if ids)
    return (f"Benchmark {blueprint.name}: {len(accepted)} items; targets {json.dumps(blueprint.capability_targets)}; "
            f"items per capability {json.dumps(caps)}; question types {', '.join(blueprint.question_types)}.\n"
            f"One example per template:\n\n{examples}\n\nScore the benchmark as a whole.")


def _means(rows) -> dict[str, float | None]:
    rows = list(rows)
    out: dict[str, float | None] = {}
    for d in DIMENSIONS:
        vals = [r[d] for r in rows if r.get(d) is not None]
        out[d] = sum(vals) / len(vals) if vals else None
    out["overall"] = overall(out)
    return out


def overall(scores: dict[str, float | None]) -> float | None:
    """The weighted rubric score; a dimension without a score (AFC where nothing acts) drops out."""
    have = {d: w for d, w in WEIGHTS.items() if scores.get(d) is not None}
    if not have:
        return None
    return sum(scores[d] * w for d, w in have.items()) / sum(have.values())


def _average(per_judge: dict[str, Any]) -> dict[str, Any]:
    means = [j["item_means"] for j in per_judge.values()]
    benches = [j["benchmark"] for j in per_judge.values() if j["benchmark"] is not None]
    return {"items": _means(means), "benchmark": _means(benches), "judges": len(per_judge)}


def _builtin_rubric(samples: dict[str, list[str]], accepted: dict[str, OEItem],
                    blind_reports: dict[str, dict]) -> dict[str, Any]:
    """What rules can say: every released item passed its format (FSQ) and derivation (QAC)
    contracts; TSD from how far the best blind solver stayed from chance. The rest needs a judge."""
    items = {}
    for template, ids in samples.items():
        report = blind_reports.get(template) or {}
        chance, best = report.get("chance"), report.get("best_accuracy")
        tsd = None if chance is None or best is None or chance >= 1 else \
            round(100.0 * (1.0 - max(0.0, best - chance) / (1.0 - chance)), 2)
        for iid in ids:
            items[iid] = {"FSQ": 100.0, "QAC": 100.0, "TSD": tsd, **{d: None for d in ("UIA", "EGC", "SGC", "AFC", "SSC")}}
    return {"model": "builtin:rules", "items": items, "item_means": _means(items.values())}
