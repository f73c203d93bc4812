"""The ``program`` answer rule: a template carries its own answer program, run in the sandbox.

A template (often one the synthesizer model wrote) declares::

    answer_rule:
      rule: program
      quantity: field:visible_pixels    # what the answer is a function of (the independence gate
                                        # treats items reading the same quantity as dependent)
      slots: [a, b]                     # exactly the template's slots
      question_types: [yes_no]          # the question types the program answers
      whole_order: true                 # optional: the answer orders all its referents
      complete_labels: false            # optional: the answer needs every object registered
      code: |
        def candidates(evidence, view, template):
            ...  # -> [{"slots": {...}, "answer": "yes", "margin": 412.0, "values": {...}}, ...]
        def derive(evidence, view, slots, template):
            ...  # -> "yes" | None  (or {"answer": ..., "reason": ...})

``candidates`` lists admissible slot assignments for one view (``view`` is the view index, or
None for a scene-scope template) with their answers and a margin (how clearly the evidence
separates the answer from the alternatives; larger is clearer); ``values`` is optional. ``derive``
gives the answer for one assignment, or None when the evidence does not settle it. Both run in a
:class:`forge.sandbox.Sandbox` (one worker per program source, reused for every call; standard
library modules of ``forge.sandbox.SAFE_MODULES`` only). ``template`` is the template as a plain
mapping (without the code). The same contracts, gates and admission apply as to any rule: the
bound answer is derived again by ``derive`` for every binding and item.

The evidence view (plain JSON) a program reads::

    {"scene": 3, "labels_complete": true, "metres_per_pixel": null,
     "views": [{"index": 0, "width": 640, "height": 480, "role": "view", "time": null,
                "camera_position": [x, y, z] | null, "forward": [x, y, z] | null}, ...],
     "objects": [{"name": "red cube", "category": "cube", "colour": "red" | null, "referable": true,
                  "position": [x, y, z] | null, "box_3d": {"min": [x, y, z], "max": [x, y, z]} | null,
                  "support": "table" | null, "tilt_deg": 3.0 | null, "attributes": {...}}, ...],
     "facts": {"red cube": {"0": {"visible_pixels": 1830, "in_frustum": true,
                                  "bbox_2d": [x0, y0, x1, y1] | null, "center_2d": [x, y] | null,
                                  "median_depth": 1.23 | null, "truncation": 0.0 | null}, ...}, ...}}

``facts[name][str(view)]`` is what one view shows of one object: visible pixels, its 2D box and
centroid in pixels, its median depth in metres, and the share of its projected 3D box outside the
image. Only referable objects may be named in questions (admission checks it as for any rule).

Failures: a program that raises, returns something malformed, or is refused, timed out or out of
memory in the sandbox raises the sandbox's error; ``bind_template`` then fails with that reason
(recorded with the skill run) and a contract calling ``derive`` fails with it. A program stopped
for a refusal, a timeout, its memory or a crash is not run again in this process (each later call
fails at once with the same reason), so one looping program costs one timeout, not one per call.

Re-verification (``rule_reverifier:program``) derives the answer again with the program's
``derive`` over a view measured anew from the source's raw arrays (segmentation and depth), not
from the registered evidence: visible pixels, boxes, centroids and median depths are recomputed
per view, 3D boxes come from the simulator's object states; ``truncation`` and ``in_frustum`` are
null there (programs must accept null for them), objects are named by their pixels.
"""

from __future__ import annotations

import collections
import hashlib
import json
import math
import threading
from typing import Any

import numpy as np

from forge_skills.oe.types import EvidenceRecord
from forge.registry import register
from forge.sandbox import Limits, ProgramError, Raw, Sandbox, SandboxError
from forge_skills.oe.synthesize.answer_rules import Rule
from forge_skills.oe.synthesize.rule_margins import Derivation
from forge_skills.oe.synthesize.fact_table import Candidate, FactTable
from forge_skills.oe.synthesize.answer_rules import register as register_rule

PROGRAM_LIMITS = Limits(timeout_s=3.0, memory_mb=512, cpu_s=600)
MAX_CANDIDATES = 5000
MAX_WORKERS = 16
SPEC_KEYS = ("rule", "quantity", "slots", "question_types", "code", "whole_order", "complete_labels")


# -- the evidence view ---------------------------------------------------------------------------


def evidence_view(evidence: EvidenceRecord) -> dict[str, Any]:
    """The plain JSON view of an evidence record a program reads (see the module docstring)."""
    facts: dict[str, dict[str, Any]] = {o.name: {} for o in evidence.objects}
    for f in evidence.facts:
        facts.setdefault(f.object, {})[str(f.view)] = {
            "visible_pixels": f.visible_pixels, "in_frustum": f.in_frustum, "bbox_2d": f.bbox_2d,
            "center_2d": f.center_2d, "median_depth": f.median_depth, "truncation": f.truncation}
    return {
        "scene": evidence.scene_index, "labels_complete": evidence.labels_complete,
        "metres_per_pixel": evidence.metres_per_pixel,
        "views": [{"index": v.index, "width": v.width, "height": v.height, "role": v.role, "time": v.time,
                   "camera_position": v.camera_position, "forward": v.forward} for v in evidence.views],
        "objects": [{"name": o.name, "category": o.category, "colour": o.color or None, "referable": o.referable,
                     "position": o.position,
                     "box_3d": {"min": o.box_3d_min, "max": o.box_3d_max} if o.box_3d_min and o.box_3d_max else None,
                     "support": o.support, "tilt_deg": o.tilt_deg, "attributes": o.attributes}
                    for o in evidence.objects],
        "facts": facts,
    }


def raw_view(source: dict[str, Any], arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """The same view measured from a source record's raw segmentation and depth arrays."""
    facts: dict[str, dict[str, Any]] = {}
    for o in source["objects"]:
        per_view = facts.setdefault(o["name"], {})
        for v in source["views"]:
            mask = arrays[f"seg_{v['index']}"] == o["body"]
            px = int(mask.sum())
            fact: dict[str, Any] = {"visible_pixels": px, "in_frustum": None, "bbox_2d": None, "center_2d": None,
                                    "median_depth": None, "truncation": None}
            if px:
                ys, xs = np.nonzero(mask)
                fact.update(bbox_2d=[int(xs.min()), int(ys.min()), int(xs.max()), int(ys.max())],
                            center_2d=[round(float(xs.mean()), 2), round(float(ys.mean()), 2)],
                            median_depth=round(float(np.median(arrays[f"depth_{v['index']}"][mask])), 5))
            per_view[str(v["index"])] = fact
    return {
        "scene": source.get("scene_index"), "labels_complete": True, "metres_per_pixel": None,
        "views": [{"index": v["index"], "width": v["width"], "height": v["height"], "role": v.get("role", "view"),
                   "time": v.get("time"), "camera_position": v.get("camera_position"), "forward": v.get("forward")}
                  for v in source["views"]],
        "objects": [{"name": o["name"], "category": o["category"], "colour": o.get("color") or None,
                     "referable": True, "position": o.get("position"),
                     "box_3d": {"min": o["aabb_min"], "max": o["aabb_max"]} if o.get("aabb_min") else None,
                     "support": o.get("support"), "tilt_deg": o.get("tilt_deg"), "attributes": {}}
                    for o in source["objects"]],
        "facts": facts,
    }


class _Memo:
    """Serialized views by the identity of what they were made from (kept alive while cached)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self.items: collections.OrderedDict[tuple, tuple[Any, Raw]] = collections.OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple, keep: Any, make) -> Raw:
        with self.lock:
            hit = self.items.get(key)
            if hit is not None and hit[0] is keep:
                self.items.move_to_end(key)
                return hit[1]
        text = Raw(json.dumps(make(), allow_nan=False))
        with self.lock:
            self.items[key] = (keep, text)
            while len(self.items) > self.size:
                self.items.popitem(last=False)
        return text


_VIEWS = _Memo()


def _evidence_json(evidence: EvidenceRecord) -> Raw:
    return _VIEWS.get(("evidence", id(evidence)), evidence, lambda: evidence_view(evidence))


def template_view(template: dict[str, Any]) -> dict[str, Any]:
    """The template as a program sees it: its fields, without the program's code."""
    out = {k: v for k, v in template.items() if k not in ("file", "file_hash")}
    out["answer_rule"] = {k: v for k, v in template["answer_rule"].items() if k != "code"}
    return out


# -- programs in their sandboxes --------------------------------------------------------------------


FATAL = ("refused", "timeout", "memory", "crash")


class Program:
    """One answer program's sandbox; after a fatal failure it is not run again in this process."""

    def __init__(self, code: str, name: str) -> None:
        self.box = Sandbox(code, limits=PROGRAM_LIMITS, name=f"answer program of template {name!r}")
        self.fatal: SandboxError | None = None

    def call(self, function: str, *args: Any) -> Any:
        if self.fatal is not None:
            f = self.fatal
            raise type(f)(f"{f.problem} (on an earlier call; the program is not run again in this process)",
                          program=f.program, operation=f.operation, detail=f.detail)
        try:
            if not self.box.alive:
                self.box.start()
                missing = [n for n in ("candidates", "derive") if n not in self.box.functions]
                if missing:
                    raise ProgramError(f"the answer program defines no {', '.join(m + '()' for m in missing)}",
                                       program=self.box.name)
            return self.box.call(function, *args)
        except SandboxError as exc:
            if exc.kind in FATAL or self.box.load_error is not None or "defines no" in exc.problem:
                self.fatal = exc
            raise

    def close(self) -> None:
        self.box.close()


_PROGRAMS: collections.OrderedDict[str, Program] = collections.OrderedDict()
_PROGRAMS_LOCK = threading.Lock()


def program_for(template: dict[str, Any]) -> Program:
    """The (shared) sandboxed program of a template, by the digest of its code."""
    code = template["answer_rule"]["code"]
    key = hashlib.sha256(code.encode()).hexdigest()
    with _PROGRAMS_LOCK:
        prog = _PROGRAMS.get(key)
        if prog is None:
            prog = _PROGRAMS[key] = Program(code, str(template.get("id", "?")))
            while len(_PROGRAMS) > MAX_WORKERS:
                _PROGRAMS.popitem(last=False)[1].close()
        else:
            _PROGRAMS.move_to_end(key)
        return prog


# -- the rule -------------------------------------------------------------------------------------


def spec_problems(answer_rule: dict[str, Any]) -> list[str]:
    """What is wrong with a ``program`` answer rule's declaration (not with its code's behaviour)."""
    problems = []
    code = answer_rule.get("code")
    if not isinstance(code, str) or not code.strip():
        problems.append("answer_rule.code must hold the program's Python source")
    else:
        try:
            compile(code, "<answer program>", "exec")
        except SyntaxError as exc:
            problems.append(f"answer_rule.code does not compile: {exc.msg} (line {exc.lineno})")
    for key in ("slots", "question_types"):
        value = answer_rule.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            problems.append(f"answer_rule.{key} must be a list of names")
    if not isinstance(answer_rule.get("quantity"), str) or not answer_rule.get("quantity"):
        problems.append("answer_rule.quantity must name what the answer is a function of")
    unknown = sorted(set(answer_rule) - set(SPEC_KEYS))
    if unknown:
        problems.append(f"answer_rule has unknown keys {unknown} (a program rule takes {list(SPEC_KEYS)})")
    return problems


def _slot_value_ok(value: Any) -> bool:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return True
    return isinstance(value, list) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value)


def _as_candidates(out: Any, tpl: dict[str, Any], name: str) -> list[Candidate]:
    """A program's candidates() output checked and converted; malformed output is a ProgramError."""
    if not isinstance(out, list):
        raise ProgramError(f"candidates() returned {type(out).__name__}, not a list", program=name)
    if len(out) > MAX_CANDIDATES:
        raise ProgramError(f"candidates() returned {len(out)} candidates (at most {MAX_CANDIDATES})", program=name)
    slots = set(tpl["answer_rule"]["slots"])
    cands = []
    for k, c in enumerate(out):
        problem = None
        if not isinstance(c, dict) or not isinstance(c.get("slots"), dict):
            problem = "is not a mapping with 'slots'"
        elif set(c["slots"]) != slots:
            problem = f"fills slots {sorted(c['slots'])}, the rule declares {sorted(slots)}"
        elif not all(_slot_value_ok(v) for v in c["slots"].values()):
            problem = "has a slot value that is not a name, an index or a list of them"
        elif not isinstance(c.get("answer"), str) or not c["answer"]:
            problem = "has no answer string"
        elif not isinstance(c.get("margin", 0.0), (int, float)) or isinstance(c.get("margin"), bool) \
                or not math.isfinite(float(c.get("margin", 0.0))):
            problem = "has a margin that is not a finite number"
        elif not isinstance(c.get("values", {}), dict):
            problem = "has values that are not a mapping"
        if problem:
            raise ProgramError(f"candidates() item {k} {problem}: {json.dumps(c)[:200]}", program=name)
        cands.append(Candidate(dict(c["slots"]), c["answer"], float(c.get("margin", 0.0)), dict(c.get("values", {}))))
    return cands


def _candidates(ft: FactTable, view: Any, tpl: dict[str, Any]) -> list[Candidate]:
    prog = program_for(tpl)
    out = prog.call("candidates", _evidence_json(ft.evidence), view, template_view(tpl))
    return _as_candidates(out, tpl, prog.box.name)


def _answer(out: Any, name: str) -> Derivation:
    if out is None:
        return None, {"reason": "the answer program admits no answer for these slots"}
    if isinstance(out, str) and out:
        return out, {"rule": "program"}
    if isinstance(out, dict) and (out.get("answer") is None or isinstance(out.get("answer"), str)):
        details = {k: v for k, v in out.items() if k != "answer"}
        if out.get("answer") is None:
            details.setdefault("reason", "the answer program admits no answer for these slots")
        return out.get("answer") or None, {"rule": "program", **details}
    raise ProgramError(f"derive() returned {json.dumps(out)[:200]}; expected a string, null or "
                       "{\"answer\": ..., \"reason\": ...}", program=name)


def _derive(ft: FactTable, view: Any, slots: dict[str, Any], tpl: dict[str, Any]) -> Derivation:
    prog = program_for(tpl)
    return _answer(prog.call("derive", _evidence_json(ft.evidence), view, slots, template_view(tpl)), prog.box.name)


_RULES: dict[tuple, Rule] = {}


_CHECKED: dict[str, list[str]] = {}


def for_template(template: dict[str, Any]) -> Rule:
    """The program rule as declared by one template: its slots, question types and quantity."""
    spec = template["answer_rule"]
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()
    problems = _CHECKED.get(digest)
    if problems is None:
        problems = _CHECKED[digest] = spec_problems(spec)
    if problems:
        raise ValueError(f"template {template.get('id')!r}: " + "; ".join(problems))
    key = (tuple(spec["slots"]), tuple(spec["question_types"]), spec["quantity"], bool(spec.get("whole_order")),
           bool(spec.get("complete_labels")))
    rule = _RULES.get(key)
    if rule is None:
        quantity = spec["quantity"]
        rule = _RULES[key] = Rule("program", _candidates, _derive, tuple(spec["slots"]), tuple(spec["question_types"]),
                                  lambda t, q=quantity: q, complete_labels=bool(spec.get("complete_labels")),
                                  whole_order=bool(spec.get("whole_order")))
    return rule


def _undeclared(*args: Any) -> Any:
    raise ValueError("the program rule is used through rule_for(template), which reads its declaration")


PROGRAM_RULE = register_rule(Rule("program", _undeclared, _undeclared, (), (), for_template=for_template), __name__)


# -- re-verification ------------------------------------------------------------------------------


_RAW = _Memo(16)


def reverify_program(template: dict[str, Any], slots: dict[str, Any], view: int | None, source: dict[str, Any],
                     arrays: dict[str, np.ndarray]) -> str | None:
    """The answer the program derives from a view measured again on the raw arrays."""
    names = tuple((o["name"], o["body"]) for o in source["objects"])
    text = _RAW.get(("raw", id(arrays), names), arrays, lambda: raw_view(source, arrays))
    prog = program_for(template)
    answer, _ = _answer(prog.call("derive", text, view, slots, template_view(template)), prog.box.name)
    return answer


register("rule_reverifier", "program", reverify_program)


# -- a small evidence view to try a program on before it is written (the synthesizer) ----------------


def sample_view() -> dict[str, Any]:
    """A made-up tabletop scene of six objects in two views, for dry runs of new programs."""
    objects = [("red cube", "cube", (0.10, 0.05), 0.045), ("blue cube", "cube", (-0.15, 0.12), 0.045),
               ("green mug", "mug", (0.22, -0.10), 0.06), ("yellow mug", "mug", (-0.05, -0.18), 0.06),
               ("purple bowl", "bowl", (0.30, 0.20), 0.08), ("orange ball", "ball", (-0.28, 0.02), 0.035)]
    pixels = {0: [2400, 900, 1800, 0, 3100, 650], 1: [1500, 2100, 0, 1900, 2800, 40]}
    views = [{"index": i, "width": 640, "height": 480, "role": "view", "time": None,
              "camera_position": [1.2 * (1 if i == 0 else -1), 0.3, 1.0], "forward": None} for i in (0, 1)]
    facts: dict[str, dict[str, Any]] = {}
    for k, (name, _cat, (x, y), r) in enumerate(objects):
        for i in (0, 1):
            px = pixels[i][k]
            cx, cy = 320 + 700 * x * (1 if i == 0 else -1), 240 + 500 * y
            side = max(1, int(math.sqrt(px)))
            facts.setdefault(name, {})[str(i)] = {
                "visible_pixels": px, "in_frustum": True,
                "bbox_2d": [int(cx - side / 2), int(cy - side / 2), int(cx + side / 2), int(cy + side / 2)] if px else None,
                "center_2d": [round(cx, 2), round(cy, 2)] if px else None,
                "median_depth": round(1.0 + 0.8 * (x if i == 0 else -x) + 0.5, 5) if px else None,
                "truncation": 0.0 if px else None}
    return {"scene": 0, "labels_complete": True, "metres_per_pixel": None, "views": views,
            "objects": [{"name": n, "category": c, "colour": n.split()[0], "referable": True, "position": [x, y, 0.8 + r],
                         "box_3d": {"min": [x - r, y - r, 0.8], "max": [x + r, y + r, 0.8 + 2 * r]},
                         "support": "table", "tilt_deg": 0.0, "attributes": {}} for n, c, (x, y), r in objects],
            "facts": facts}


def dry_run(template: dict[str, Any], limit: int = 40) -> list[str]:
    """Problems found by running a template's program on :func:`sample_view`: errors, refusals,
    malformed output, candidates whose answer ``derive`` does not give back."""
    problems = spec_problems(template["answer_rule"])
    if problems:
        return problems
    view_text = Raw(json.dumps(sample_view()))
    prog = program_for(template)
    views: list[int | None] = [0, 1] if template.get("scope", "view") == "view" else [None]
    tv = template_view(template)
    try:
        for view in views:
            cands = _as_candidates(prog.call("candidates", view_text, view, tv), template, prog.box.name)
            for c in cands[:limit]:
                answer, _ = _answer(prog.call("derive", view_text, view, c.slots, tv), prog.box.name)
                if answer != c.answer:
                    return [f"candidates() gave answer {c.answer!r} for slots {c.slots} in view {view}, "
                            f"but derive() gives {answer!r}: the two must agree"]
    except SandboxError as exc:
        return [f"running the program on a sample scene failed: {type(exc).__name__}: {exc.problem}"
                + (f"\n{exc.detail}" if exc.detail else "")]
    return []
