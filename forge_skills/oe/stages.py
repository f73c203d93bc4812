"""The OE track's runner: what its roles do beyond running their skill, its gates and repair as
steps of the stage graph, and the routes back for more evidence (``forge.stagegraph``).

The planner's workflow gives the graph its nodes and their order (blueprint, each source's plan,
collect and structure, template, bind, realize, package); this track adds the verify step after
realize (gates B1, DUP, DEP, BAL, C1, with refills), the repair step it routes to, and the two
routes back to plan when the composition is short of its targets. Node state is ids only; the
store is the source of truth, so a killed build resumes by running again.
"""

from __future__ import annotations

import json
import math
import sys
from collections import ChainMap
from pathlib import Path
from typing import Any

from forge_skills.oe.types import Template
from forge.errors import ContractError, DefinitionError
from forge.executor import NodeResult, WorkflowNode
from forge.models.config import ModelRoles
from forge.models.roles import RoleContext
from forge.stagegraph import BuildState, Route, Step, WorkflowRunner
from forge.tracks import BuildContext
from forge_skills.oe.roles import judge, verify_grey_batch
from forge_skills.package.assess_step import assess_package, model_panel
from forge_skills.package.build_record import blind_margins, repairs_by_cause
from forge_skills.oe.verify.gates import (BindingSummary, StoreMemo, allocate, allocate_by_source,
                                          binding_determinants, grey_batches, judge_grey_batch)
from forge_skills.oe.verify.dependence_gates import independent
from forge_skills.oe.topups import HEADROOM, TopUps
from forge_skills.oe.screening import Screening
from forge_skills.oe.build_queries import BuildQueries


MAX_REFILLS = 2  # realize rounds after S5 screening, per build
REFILL_SPARE = 10  # a refill realizes at least this many more than the shortfall


class StageRunner(BuildQueries, Screening, TopUps, WorkflowRunner):
    """The OE track's handlers, gates and routes over its workflow graph."""

    steps = (Step("verify", "S5", "verification (gates B1, DUP, DEP, BAL, C1)", after="realize"),
             Step("repair", "S5", "diagnosis and repair", then="verify"),
             Step("assess", "S5", "gates E and F: panel, IRT, report and exports", after="package"))
    stage_titles = {"S1": "intent blueprinting", "S2": "data collection", "S3": "evidence structuring",
                    "S4": "benchmark synthesis", "S5": "packaging"}

    def __init__(self, ctx: BuildContext) -> None:
        super().__init__(ctx)
        self.models = ctx.models or RoleContext(None, ModelRoles())  # roles without a model: built-in backends
        # Per source: the plan skill's unit parameter and the unit-count field; the template families.
        self.scales = [d.scale for d in ctx.sources]
        self._families = [d.templates for d in ctx.sources]
        self.source_kinds = [d.kind for d in ctx.sources]
        self.repair = ctx.repair  # a RepairLoop, or None when repair is ablated
        self.ablate = ctx.ablate
        self._replaced: set[str] = set()
        self._final_checked = False
        self.verified_before_repair = 0
        self.gates = ctx.gates
        self.log = ctx.gate_log
        self.item_stats: dict[str, Any] = {}
        self.blind_reports: dict[str, dict] = {}
        self.grey: dict[str, bool] = {}
        self._realized: set[str] = set()  # bindings realized so far (allocation plus refills)
        self._disabled: set[str] = set()  # templates held back by gate A
        # Templates C1 held in this build -> their items then: a later allocation gives their
        # share to their siblings, and their items stay in the pool so C1 still decides them.
        self._blind_held: dict[str, list[str]] = {}
        self._refills = 0
        self._blind_memo: StoreMemo | None = None  # C1 reports by input digest (persisted in the store)
        self._summaries: dict[str, BindingSummary] = {}  # bindings are immutable: summarize each once
        self._repaired_items: set[str] = set()
        self.panel_usage: dict[str, Any] = {}  # gate E: what the panel's models were asked (the evaluation's tokens)

    # -- the stage graph (forge.stagegraph) -------------------------------------------------

    def handlers(self):
        return {"plan": self.plan, "template": self.templates, "bind": self.bind, "realize": self.realize,
                "package": self.package}

    def step_handlers(self):
        return {"verify": self.verify, "repair": self.repair_round, "assess": self.assess}

    def routes(self) -> list[Route]:
        return [Route("bind", lambda state: "plan" if _more(state) else None, ("plan",)),
                Route("verify", self.route_after_verify, ("repair", "plan"))]

    # -- the track runner protocol (forge.tracks.TrackRunner) -------------------------------

    def package_id(self, state: dict[str, Any]) -> str:
        return state["ids"]["Package"][0]

    def summary(self, state: dict[str, Any]) -> dict[str, Any]:
        stats = self.item_stats
        accepted = stats.get("accepted", [])
        replaced = self._replaced
        contract_rejected = [i for i in stats.get("contract_rejected", []) if i not in replaced]
        blind_held = [i for i in stats.get("blind_held", []) if i not in replaced]
        released = self.executor.load(self.package_id(state)).counts["items"]
        out = {
            "bindings": stats.get("bindings", 0),
            "items_candidates": stats.get("candidates", 0),
            "items_accepted": len(accepted),
            "items_rejected": len(contract_rejected) + len(stats.get("grey_held", [])) + len(blind_held),
            "items_released": released,
            # Candidates end rejected (contracts, gates A and C1), held (duplicate, dependent or
            # over-represented answers) or accepted; the composition releases what it needs of the
            # accepted ones, the rest stay in the store for later builds.
            "items_held": stats.get("duplicates", 0) + stats.get("dependent", 0) + stats.get("balance_held", 0),
            "items_not_needed": max(0, len(accepted) - released),
            "artifacts_repaired": len(replaced),
            "items_near_duplicates": stats.get("duplicates", 0),
            "items_dependent": stats.get("dependent", 0),
            "items_held_for_balance": stats.get("balance_held", 0),
            "items_refilled": stats.get("refilled", 0),
            "capabilities_unavailable": self._blueprint().unavailable if "blueprint" in self.results else {},
            "rejections": {"contracts": len(contract_rejected),
                           "gate_A": len(stats.get("grey_held", [])), "gate_C1": len(blind_held)},
            "gates": self.log.counts,
            "templates": {t: {"grey_batch": "pass" if ok else "fail",
                              "blind": {k: self.blind_reports.get(t, {}).get(k)
                                        for k in ("items", "chance", "best_solver", "best_accuracy", "flagged")}}
                          for t, ok in sorted(self.grey.items())},
        }
        if self.repair is not None:
            out["repair"] = self.repair.summary(set(accepted), self.verified_before_repair)
        if self.panel_usage:
            out["gate_E_models"] = self.panel_usage
        return out

    # -- stages ---------------------------------------------------------------------------

    # -- roles ------------------------------------------------------------------------------

    def plan(self, node: WorkflowNode, state: BuildState) -> dict[str, Any]:
        """A source's plan skill over as many units as the source is to give."""
        units = dict(state.get("units") or {})
        if not units:
            bp = self._blueprint()
            units = {str(i): int(src[self.scales[i]["field"]]) for i, src in enumerate(bp.sources)}
        node.fanout = self.unit_fanout(node, self.scales[node.source]["parameter"], units[str(node.source)])
        return {**self.run_role(node, state, "scene specification"), "units": units}

    def templates(self, node: WorkflowNode, state: BuildState) -> dict[str, Any]:
        update = self.run_role(node, state, "template")
        self._check_folders(node, update["ids"]["Template"])
        self._check_coverage(update["ids"]["Template"])
        return update

    def _check_folders(self, node: WorkflowNode, template_ids: list[str]) -> None:
        """An intent's template folder none of whose templates could be read is a mistake to
        stop on, not a folder to skip (a broken template beside good ones is reported and left
        out)."""
        self.executor.preload(template_ids)
        loaded = {self.executor.load(t).file for t in template_ids}
        folders: dict[str, list[str]] = {}
        for p in node.fanout or []:
            if p["label"].startswith("dir:"):
                folders.setdefault(str(Path(p["path"]).parent), []).append(p["label"])
        dead = sorted(f for f, labels in folders.items() if not set(labels) & loaded)
        if dead:
            errors = self.results.get(node.role, NodeResult()).errors
            raise DefinitionError(f"no template of the folder {dead[0]} could be read:"
                                  + "".join(f"\n  {e}" for e in errors[:5]),
                                  hint="fix the templates, or remove the folder from templates_dirs")

    def bind(self, node: WorkflowNode, state: BuildState) -> dict[str, Any]:
        """Each source's evidence bound to the templates of its own families (and the intent's
        template folders); more units when the bindings cannot meet the targets."""
        ids = state["ids"]
        bind = NodeResult()
        for i in range(self.workflow.sources):
            templates = self._templates_for(i, ids["Template"])
            evidence = state["source_ids"][str(i)]["EvidenceRecord"]
            bind.merge(self.run_node(node.role, {**ids, "Template": templates, "EvidenceRecord": evidence}))
        bindings = bind.verified
        if not bindings and not bind.rejected:
            bp = self._blueprint()
            raise ContractError(
                f"no evidence of source {_kinds(bp)} admits a question for {', '.join(bp.capabilities)}: "
                f"the source registers none of the facts these templates need",
                hint="`forge resources` lists what each source registers; choose capabilities it can support")
        self.require(node.role, bind, "binding")
        update: dict[str, Any] = {"ids": {"Binding": bindings}, "collected": dict(state["units"])}
        extra = self._extra_units(bindings, state)
        if extra:
            update["units"] = {i: n + extra.get(i, 0) for i, n in state["units"].items()}
            update["topups"] = state.get("topups", 0) + 1
            update["notes"] = [f"composition short of its targets: collecting {sum(extra.values())} more units"]
            self.progress.stage(f"   {update['notes'][0]}")
        return update

    def _templates_for(self, index: int, template_ids: list[str]) -> list[str]:
        """Templates of the families source ``index`` serves, plus those of the intent's folders."""
        if self.workflow.sources == 1:
            return template_ids
        families = set(self._families[index])
        self.executor.preload(template_ids)
        return [t for t in template_ids if _family(self.executor.load(t).file) in families | {None}]

    def realize(self, node: WorkflowNode, state: BuildState) -> dict[str, Any]:
        ids = state["ids"]
        # A template C1 held earlier in this build would be held again: its siblings take its share.
        bindings = {b: s for b, s in self._binding_summaries(ids["Binding"]).items() if s.template not in self._blind_held}
        plan = allocate_by_source(self._blueprint(), bindings, self._binding_sources(bindings, state), HEADROOM)
        self.item_stats["verifier_held"] = []
        grey, rest = grey_batches(plan, self.gates["grey_batch"])
        items_ok: list[str] = []
        items_bad: list[str] = []
        # Gate A: a small batch per template first; only templates that pass get full synthesis.
        enabled = []
        for template, bids in sorted(grey.items()):
            r = self.run_node(node.role, {"Binding": bids}, label=f"S4 grey batch {template}")
            # The verifier reads the batch that passed its contracts; it can only add failures.
            self.executor.preload(r.verified)
            doubted = verify_grey_batch(self.models, self.store, template,
                                        {i: self.executor.load(i) for i in r.verified})
            self._record_verifier(doubted)
            passed = [i for i in r.verified if i not in doubted]
            items_ok += passed
            items_bad += r.rejected
            self.item_stats.setdefault("verifier_held", []).extend(sorted(doubted))
            if judge_grey_batch(self.log, template, passed, r.rejected + sorted(doubted), self.gates["grey_min_valid"]):
                enabled.append(template)
            self.grey[template] = template in enabled
        full = [b for t in enabled for b in rest[t]]
        r = self.run_node(node.role, {"Binding": full}, label="S4 synthesize.realize_item")
        items_ok += r.verified
        items_bad += r.rejected
        disabled = {t for t in grey if t not in enabled}
        # Realized: the items hold what later steps read, and a repair loads a binding it needs.
        self.executor.forget(b for bids in plan.values() for b in bids)
        self.executor.preload(items_ok + items_bad)
        # An item a repair replaced stays replaced when a later round realizes its binding again
        # (the same invocation returns the same stored item).
        kept = [i for i in items_ok if self.executor.load(i).template not in disabled and i not in self._replaced]
        held = [i for i in items_ok if self.executor.load(i).template in disabled]
        self.item_stats.update({"candidates": len(items_ok) + len(items_bad), "contract_rejected": items_bad,
                                "grey_held": held, "bindings": len(bindings),
                                "bindings_realized": sum(len(v) for v in plan.values())})
        self._realized = {b for t in grey for b in grey[t]} | set(full)
        self._disabled = disabled
        self._refills = 0  # a new allocation gets its own refill rounds
        # Back from S5 for more units: items repaired in earlier rounds stay in the pool.
        kept += [i for i in sorted(self._repaired_items - set(kept)) if i not in self._replaced]
        skip = self._replaced | set(kept)
        kept += [i for t in sorted(self._blind_held) for i in self._blind_held[t] if i not in skip]
        return {"ids": {"OEItem": kept}}

    def _refill(self, accepted: dict[str, Any], binding_ids: list[str]) -> list[str]:
        """Realize more bindings of capabilities that gates left short of their targets: balance,
        blind and duplicate screening happen after allocation, so allocation's headroom can fall
        short. Only templates that passed gate A and are not flagged blind are drawn from."""
        bp = self._blueprint()
        have: dict[str, int] = {}
        for it in accepted.values():
            have[it.capability] = have.get(it.capability, 0) + 1
        short = {c: t - have.get(c, 0) for c, t in bp.capability_targets.items() if have.get(c, 0) < t}
        if not short:
            return []
        held = self._disabled | set(self._blind_held)  # every template C1 flagged is in _blind_held
        unused = [b for b in binding_ids if b not in self._realized]
        summaries = {b: s for b, s in self._binding_summaries(unused).items()
                     if s.capability in short and s.template not in held}
        # A binding whose answer an accepted item already determines would be held by DEP.
        _, twins = independent(ChainMap({i: it.determinant for i, it in accepted.items()},
                                        binding_determinants(summaries)), first=set(accepted))
        summaries = {b: s for b, s in summaries.items() if b not in twins}
        if not summaries:
            return []
        # Drawn generously: the answers a refill draws first are those its templates have most
        # of, which the balance gate has often capped already (a 30-item build refilling 3 items
        # drew 5 that all fell in full distance bins).
        need = type(bp)(**{**bp.model_dump(), "capability_targets": {c: max(math.ceil(n * 1.5), n + REFILL_SPARE)
                                                                     for c, n in short.items()}})
        plan = allocate(need, summaries, 1.0)
        chosen = [b for bids in plan.values() for b in bids]
        if not chosen:
            return []
        self._realized |= set(chosen)
        r = self.run_node("realize", {"Binding": chosen}, label="S5 refill")
        self.item_stats["candidates"] = self.item_stats.get("candidates", 0) + len(r.verified) + len(r.rejected)
        self.item_stats["refilled"] = self.item_stats.get("refilled", 0) + len(chosen)
        return r.verified

    def _binding_sources(self, bindings: dict[str, BindingSummary], state: BuildState) -> dict[str, str]:
        """Binding id -> the kind of the source its evidence came from."""
        if self.workflow.sources == 1:
            return {}
        kind_of = self._evidence_sources(state)
        evidence = self.store.fields(list(bindings), {"evidence": "$.evidence"})
        return {b: kind_of.get(f["evidence"], "") for b, f in evidence.items()}

    def _binding_summaries(self, ids: list[str]) -> dict[str, BindingSummary]:
        missing = [b for b in ids if b not in self._summaries]
        rows = self.store.fields(missing, {"template": "$.template", "answer": "$.answer",
                                           "capability": "$.presentation.capability",
                                           "intervals": "$.presentation.options.intervals",
                                           "determinant": "$.presentation.determinant",
                                           "question_type": "$.presentation.question_type",
                                           "scoring": "$.presentation.scoring",
                                           "kinds": "$.presentation.kinds",
                                           "difficulty": "$.difficulty",
                                           "place": "$.presentation.answer_place"}) if missing else {}
        for bid, f in rows.items():
            f["determinant"] = f.get("determinant") or ""
            f["place"] = sys.intern(f.get("place") or "")
            f["difficulty"] = sys.intern(f.get("difficulty") or "medium")
            for name in ("question_type", "scoring", "kinds"):
                f[name] = f.get(name) or ""
            for name in ("template", "answer", "capability", "question_type", "scoring", "kinds"):
                if isinstance(f[name], str):  # a few hundred distinct texts: one copy of each
                    f[name] = sys.intern(f[name])
            intervals = json.loads(f.pop("intervals") or "null")
            if intervals:  # balance the interval a count falls in, not the raw count
                value = float(f["answer"])
                f["answer"] = next((label for lo, hi, label in intervals if lo <= value <= hi), f["answer"])
            self._summaries[bid] = BindingSummary(**f)
        return {b: self._summaries[b] for b in ids if b in self._summaries}

    def _blueprint(self):
        return self.executor.load(self.results["blueprint"].verified[0])


    # -- steps ------------------------------------------------------------------------------

    def verify(self, state: BuildState) -> dict[str, Any]:
        """Gates B1, balance, C1 and DUP over the item pool, refilled while a capability is short
        and unrealized bindings remain; failures are left for the repair loop."""
        pool = list(state["ids"]["OEItem"])
        short = None
        for _ in range(MAX_REFILLS + 1):
            accepted = self._screen(pool)
            now_short = self._shortfall(accepted)
            if short is not None and now_short >= short:
                break  # the last refill did not bring the composition closer: stop drawing
            short = now_short
            extra = self._refill(accepted, state["ids"]["Binding"]) if self._refills < MAX_REFILLS else []
            if not extra:
                break
            self._refills += 1
            pool += extra
        update: dict[str, Any] = {"ids": {"OEItem": pool}}
        extra_units = self._units_for_shortfall(state)
        if extra_units:
            update.update({"units": {i: n + extra_units.get(i, 0) for i, n in state["units"].items()},
                           "topups": state.get("topups", 0) + 1,
                           "notes": [f"gates left the composition short ({self._shortfall_text()}): collecting "
                                     f"{sum(extra_units.values())} more units"]})
            self.progress.stage(f"   {update['notes'][0]}")
        return update


    def route_after_verify(self, state: BuildState) -> str | None:
        if self.repair is not None and self.repair.rounds <= self.repair.settings.budget and self._pending_failures():
            return "repair"
        return "plan" if _more(state) else None

    def _shortfall(self, accepted: dict[str, Any]) -> int:
        have: dict[str, int] = {}
        for it in accepted.values():
            have[it.capability] = have.get(it.capability, 0) + 1
        return sum(max(0, t - have.get(c, 0)) for c, t in self._blueprint().capability_targets.items())


    def repair_round(self, state: BuildState) -> dict[str, Any]:
        """One round of diagnosis and repair; repaired items replace their priors in the pool."""
        if self.repair.rounds == 0:
            self.verified_before_repair = self._verified_in_build()
        failures = self._pending_failures()
        outcome = self.repair.round(failures, {"Template": state["ids"]["Template"]})
        self._replaced |= set(outcome["replaced"])
        self._repaired_items |= set(outcome["items"])
        pool = [i for i in state["ids"]["OEItem"] if i not in self._replaced] + outcome["items"]
        return {"ids": {"OEItem": sorted(set(pool))}}

    def package(self, node: WorkflowNode, state: BuildState) -> dict[str, Any]:
        ids = state["ids"]
        accepted = self.item_stats.get("accepted", [])
        self.item_stats["contract_rejected"] = [a for a in self._rejected_in_build("OEItem")]
        self.log.flush(self.store)
        if not accepted:
            raise ContractError("no item passed the quality gates; see `forge status` and the gate decisions")
        # People's verdicts are part of what the package reports: they enter its identity ("trivial"
        # only where the reviewer answered it, so earlier reviews keep theirs).
        verdicts = [{**{k: r[k] for k in ("artifact_id", "verdict", "reviewer", "reviewed_at")},
                     **({"trivial": r["trivial"]} if r.get("trivial") is not None else {})}
                    for r in self.store.human_verdicts()]
        # So are the judges' scores and which checks ran on a model.
        self.executor.preload(accepted)
        quality = judge(self.models, self.store, {i: self.executor.load(i) for i in accepted}, self._blueprint(),
                        self.blind_reports)
        self._note_planning_roles()
        params: dict[str, Any] = {"quality": quality, "model_checks": self.models.report()}
        if verdicts:
            params["human_review"] = verdicts
        node.fanout = [params]
        pkg = self.run_node(node.role, {"Blueprint": ids["Blueprint"], "OEItem": accepted})
        self.require(node.role, pkg, "package")
        return {"ids": {"Package": pkg.verified}}

    def assess(self, state: BuildState) -> dict[str, Any]:
        """Gates E and F on the released items, the report and the exports."""
        pkg_id = self.package_id(state)
        stats = self.item_stats
        replaced = self._replaced
        contracts = len([i for i in stats.get("contract_rejected", []) if i not in replaced])
        grey = len(stats.get("grey_held", []))
        blind = len([i for i in stats.get("blind_held", []) if i not in replaced])
        candidates = stats.get("candidates", 0)
        funnel = [("candidates", candidates), ("passed contracts (B1)", candidates - contracts),
                  ("passed the grey batch (A)", candidates - contracts - grey),
                  ("passed the blind test (C1)", candidates - contracts - grey - blind),
                  ("not held (DUP, DEP, BAL): accepted", len(stats.get("accepted", []))),
                  ("released", self.executor.load(pkg_id).counts["items"])]
        record = {"funnel": [{"stage": s, "items": int(n)} for s, n in funnel],
                  "repairs": repairs_by_cause(self.repair.records if self.repair is not None else []),
                  "blind": blind_margins(self.blind_reports)}
        self._summaries.clear()  # allocation is over; the assessment needs the room
        members, rows, self.panel_usage = model_panel(self, pkg_id, self.models.members("panel"))
        return {"ids": {"Package": assess_package(self, pkg_id, self.gates, record, (members, rows))}}

    def _note_planning_roles(self) -> None:
        """The coordinator counts when free text chose the capabilities (the catalogue is its
        built-in backend); the synthesizer when one is configured."""
        roles = self.models.roles
        sources = self._blueprint().capability_sources
        if sources:
            by_model = any(r.startswith("coordinator ") for rs in sources.values() for r in rs)
            self.models.note("capability choice from free text (coordinator)", "coordinator",
                             [roles.coordinator.model] if by_model and roles.coordinator is not None else None)
        if roles.synthesizer is not None:
            self.models.note("templates the library lacks (synthesizer)", "synthesizer", [roles.synthesizer.model])

    # -- repair support -------------------------------------------------------------------


    def _check_coverage(self, template_ids: list[str]) -> None:
        bp = self._blueprint()
        templates: list[Template] = [self.executor.load(t) for t in template_ids]
        caps = {t.capability for t in templates}
        qts = {t.question_type for t in templates}
        missing = [f"capability {c!r}" for c in bp.capabilities if c not in caps]
        missing += [f"question type {q!r}" for q in bp.question_types if q not in qts]
        if missing:
            failures = self.results.get("template", NodeResult()).errors
            raise DefinitionError(
                f"no verified template covers {', '.join(missing)} for source {_kinds(bp)}"
                + "".join(f"\n  {e}" for e in failures),
                hint="remove it from the intent, or add a template for it (intent field templates_dirs)",
            )


def _more(state: BuildState) -> bool:
    """Whether some source is to give more units than the bindings were made from."""
    collected = state.get("collected") or {}
    return any(n > collected.get(i, 0) for i, n in (state.get("units") or {}).items())


def _kinds(bp) -> str:
    return ", ".join(repr(s["kind"]) for s in bp.sources)


def _family(label: str) -> str | None:
    """The template family of a library label ('builtin:tabletop/x.yaml' -> 'tabletop'); None
    for a template of the intent's own folders, which every source may use."""
    lib, _, rest = label.partition(":")
    return None if lib == "dir" else rest.split("/")[0]
