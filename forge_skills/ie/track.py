"""The Interactive Embodied track: its intent section, roles and default skills, and its runner.

Roles in workflow order: blueprint, each source's plan, collect and structure (a household scene
unit, its restorable state, what binding reads of it), template, bind, synthesize (a task:
instruction, goal, compiled verifier, reference plan, split), package. The runner adds the verify
step after synthesis (gates B2, C2 and D2, whose requirements every task is checked against as
it is made), the repair step it routes failures to, and a route back for more scene units when a
scene type or difficulty is short of its target.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from forge.errors import ContractError
from forge.executor import NodeResult, WorkflowNode
from forge.intent import LoadedIntent
from forge.keys import GateId
from forge.models.config import ModelRoles
from forge.models.roles import RoleContext
from forge.planner import blueprint_params, template_file_fanout
from forge.registry import register
from forge.stagegraph import BuildState, Route, Step, WorkflowRunner
from forge.tracks import BuildContext, Track
from forge_skills.package.assess_step import assess_package
from forge_skills.package.build_record import repairs_by_cause

ROLES = ("blueprint", "plan", "collect", "structure", "template", "bind", "synthesize", "package")
SOURCE_ROLES = ("plan", "collect", "structure")
DEFAULTS = {"blueprint": "ie.blueprint", "template": "ie.load_task_template", "bind": "ie.bind_task_template",
            "synthesize": "ie.synthesize_task", "package": "ie.package"}
GATES = {"B2": GateId("B2"), "C2": GateId("C2"), "D2": GateId("D2")}
MAX_TOPUPS = 3
HEADROOM = 1.3  # tasks synthesized per task needed: absorbs bindings with no plan and gate failures
MAX_REFILLS = 2


class IESpec(BaseModel):
    """What the Interactive Embodied track should contain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tasks: int = Field(220, ge=1, le=20_000)
    scene_types: list[str] | None = Field(None, min_length=1, description="scene types to build tasks in (household: "
                                          "kitchen, living_room, bedroom, bathroom; robosuite: lift, stack, "
                                          "pick_place, nut_assembly); every type the sources offer when absent")
    task_kinds: list[str] | None = Field(None, description="task kinds (ALFRED task types or household kinds) to "
                                                           "draw from; every template's when absent")
    hard_share: float = Field(0.5, ge=0.0, le=1.0, description="share of hard tasks (two or more subtasks)")
    tolerance: float = Field(0.05, ge=0.0, le=1.0, description="allowed shortfall per scene type and difficulty")


def node_params(role: str, loaded: LoadedIntent) -> dict[str, Any]:
    return blueprint_params(loaded) if role == "blueprint" else {}


def node_fanout(role: str, loaded: LoadedIntent) -> list[dict[str, Any]] | None:
    return template_file_fanout(loaded) if role == "template" else None


class IERunner(WorkflowRunner):
    steps = (Step("verify", "S5", "verification (gates B2, C2, D2)", after="synthesize"),
             Step("repair", "S5", "diagnosis and repair", then="verify"),
             Step("assess", "S5", "gates E and F: agents' episodes, IRT and report", after="package"))
    stage_titles = {"S1": "intent blueprinting", "S2": "scene collection", "S3": "state structuring",
                    "S4": "task synthesis", "S5": "packaging"}

    def __init__(self, ctx: BuildContext) -> None:
        super().__init__(ctx)
        self.scales = [d.scale for d in ctx.sources]
        self.gates = ctx.gates
        self.log = ctx.gate_log
        self.repair = ctx.repair
        self.ablate = ctx.ablate
        self.models = ctx.models or RoleContext(None, ModelRoles())
        self.stats: dict[str, Any] = {}
        self._replaced: set[str] = set()
        self._repaired: set[str] = set()
        self.verified_before_repair = 0

    # -- the stage graph --------------------------------------------------------------------

    def handlers(self):
        return {"plan": self.plan, "synthesize": self.synthesize, "package": self.package}

    def step_handlers(self):
        return {"verify": self.verify, "repair": self.repair_round, "assess": self.assess}

    def routes(self) -> list[Route]:
        return [Route("verify", self.after_verify, ("repair", "plan"))]

    def assess(self, state: BuildState) -> dict[str, Any]:
        """Gates E and F: the built-in agents run every released task, IRT over their outcomes,
        the report."""
        pkg_id = self.package_id(state)
        candidates = (len(self.results.get("synthesize", NodeResult()).verified)
                      + len(self.results.get("synthesize", NodeResult()).rejected))
        funnel, left = [("tasks synthesized", candidates)], candidates
        for gate in ("B2", "C2", "D2"):
            left -= int(self.log.counts.get(gate, {}).get("fail", 0))
            funnel.append((f"passed {gate}", left))
        funnel += [("accepted", len(self.stats.get("accepted", []))),
                   ("released", self.executor.load(pkg_id).counts.get("tasks", 0))]
        record = {"funnel": [{"stage": s, "items": int(n)} for s, n in funnel],
                  "repairs": repairs_by_cause(self.repair.records if self.repair is not None else []), "blind": []}
        return {"ids": {"Package": assess_package(self, pkg_id, self.gates, record)}}

    def package_id(self, state: dict[str, Any]) -> str:
        return state["ids"]["Package"][0]

    # -- roles ------------------------------------------------------------------------------

    def plan(self, node: WorkflowNode, state: BuildState) -> dict[str, Any]:
        units = dict(state.get("units") or {})
        if not units:
            bp = self._blueprint()
            units = {str(i): int(src[self.scales[i]["field"]]) for i, src in enumerate(bp.sources)}
        node.fanout = self.unit_fanout(node, self.scales[node.source]["parameter"], units[str(node.source)])
        return {**self.run_role(node, state, "scene unit"), "units": units, "collected": units}

    def synthesize(self, node: WorkflowNode, state: BuildState) -> dict[str, Any]:
        """Tasks from as many bindings as each scene type and difficulty needs (with headroom),
        drawn across floor plans and templates in turn; the rest wait for refills."""
        bindings = state["ids"].get("TaskBinding", [])
        self._bindings = self._summaries(bindings)
        self._drawn = set()
        bp = self._blueprint()
        need = {(t, d): math.ceil(n * HEADROOM) for t, row in bp.targets.items() for d, n in row.items()}
        chosen = self._draw(need)
        result = self.run_node(node.role, {"TaskBinding": chosen})
        return {"ids": {"IETask": result.verified}}

    def _summaries(self, ids: list[str]) -> dict[str, dict[str, str]]:
        return self.store.fields(ids, {"scene_type": "$.scene_type", "difficulty": "$.difficulty",
                                       "scene": "$.scene", "template": "$.template",
                                       "recorded": "$.recorded_reference"})

    def _draw(self, need: dict[tuple[str, str], int]) -> list[str]:
        """Up to ``need`` undrawn bindings per (scene type, difficulty), floor plans and templates in
        turn; bindings a real demonstration reaches first (a recorded reference is worth more
        than a scripted one)."""
        from forge.keys import digest

        chosen: list[str] = []
        for cell, n in sorted(need.items()):
            groups: dict[tuple[str, str], list[str]] = {}
            for bid, f in sorted(self._bindings.items()):
                if (f["scene_type"], f["difficulty"]) == cell and bid not in self._drawn:
                    groups.setdefault((f["scene"], f["template"]), []).append(bid)
            for ids in groups.values():
                ids.sort(key=lambda b: not self._bindings[b]["recorded"])  # stable: by id otherwise
            recorded = {k for k, ids in groups.items() if any(self._bindings[b]["recorded"] for b in ids)}
            order = sorted(groups, key=lambda k: (k not in recorded, digest(k)))
            taken, depth = [], 0
            while len(taken) < n and any(len(groups[k]) > depth for k in order):
                for k in order:
                    if len(taken) < n and len(groups[k]) > depth:
                        taken.append(groups[k][depth])
                depth += 1
            chosen += taken
        self._drawn |= set(chosen)
        return chosen

    def _refill(self) -> list[str]:
        """More tasks for the cells the gates left short, from bindings not drawn yet."""
        bp = self._blueprint()
        have = self._have()
        need = {(t, d): math.ceil((n - have.get((t, d), 0)) * 1.5) for t, row in bp.targets.items()
                for d, n in row.items() if have.get((t, d), 0) < n}
        chosen = self._draw(need) if need else []
        if not chosen:
            return []
        return self.run_node("synthesize", {"TaskBinding": chosen}, label="S5 refill").verified

    def package(self, node: WorkflowNode, state: BuildState) -> dict[str, Any]:
        accepted = self.stats.get("accepted", [])
        self.log.flush(self.store)
        if not accepted:
            raise ContractError("no task passed gates B2, C2 and D2; see `forge audit` and the gate decisions")
        node.fanout = [{"model_checks": self.models.report(), "admission": self.admission()}]
        pkg = self.run_node(node.role, {"IEBlueprint": state["ids"]["IEBlueprint"], "IETask": accepted})
        self.require(node.role, pkg, "package")
        return {"ids": {"Package": pkg.verified}}

    def admission(self) -> dict[str, Any]:
        """The yield of admission: states tried and admitted (with the reasons, where a source
        admits its states), bindings drawn and those whose reference reached the goal."""
        from collections import Counter

        collected = [a for role, r in self.results.items() if role.split("@")[0] == "collect" for a in r.verified]
        flags = self.store.fields(collected, {"admitted": "$.admitted", "reason": "$.reason"})
        judged = [f for f in flags.values() if f["admitted"] is not None]
        made = self.results.get("synthesize", NodeResult())
        drawn = getattr(self, "_drawn", set())
        reached = {f["binding"] for f in self.store.fields(made.verified + made.rejected,
                                                           {"binding": "$.binding"}).values()}
        out: dict[str, Any] = {"bindings_drawn": len(drawn), "references_reached": len(reached & drawn)}
        if judged:
            reasons = Counter(f["reason"] for f in judged if f["admitted"] != "true")
            out.update({"states_tried": len(judged), "states_admitted": sum(f["admitted"] == "true" for f in judged),
                        "not_admitted": dict(sorted(reasons.items()))})
        return out

    # -- steps ------------------------------------------------------------------------------

    def verify(self, state: BuildState) -> dict[str, Any]:
        """Gate decisions B2, C2, D2 per task from the requirements each was checked against; the
        pool is the verified tasks plus those repaired since."""
        if not self._repairing():
            for _ in range(MAX_REFILLS):
                self._accept(state)
                if not self._refill():
                    break
        made = self.results.get("synthesize", NodeResult())
        pool = [t for t in dict.fromkeys(made.verified + sorted(self._repaired)) if t not in self._replaced]
        rejected = [t for t in self._rejected_tasks() if t not in self._replaced]
        checks = self.store.verifications(pool + rejected)
        self.executor.preload(pool + rejected)
        for tid in pool + rejected:
            template = self.executor.load(tid).template
            for gate, gid in GATES.items():
                rows = [r for r in checks.get(tid, []) if r["requirement"].startswith(gate)]
                failed = [r["requirement"] for r in rows if not r["passed"] and r["severity"] == "blocking"]
                self.log.decide(gid, tid, "IETask", template, "fail" if failed else "pass",
                                {"failed_requirements": failed} if failed else None)
        self.stats.update({"accepted": sorted(pool), "rejected": rejected})
        update: dict[str, Any] = {"ids": {"IETask": sorted(pool)}}
        if not self._repairing():
            extra = self._extra_units(state)
            if extra:
                update.update({"units": extra, "topups": state.get("topups", 0) + 1,
                               "notes": [f"a scene type or difficulty is short of its target: collecting "
                                         f"{sum(extra.values()) - sum(state['units'].values())} more units"]})
                self.progress.stage(f"   {update['notes'][0]}")
        return update

    def _accept(self, state: BuildState) -> None:
        made = self.results.get("synthesize", NodeResult())
        self.stats["accepted"] = sorted(t for t in dict.fromkeys(made.verified + sorted(self._repaired))
                                        if t not in self._replaced)

    def _repairing(self) -> bool:
        return self.repair is not None and self.repair.rounds <= self.repair.settings.budget and bool(self._pending())

    def after_verify(self, state: BuildState) -> str | None:
        if self._repairing():
            return "repair"
        units, collected = state.get("units") or {}, state.get("collected") or {}
        return "plan" if any(n > collected.get(i, 0) for i, n in units.items()) else None

    def repair_round(self, state: BuildState) -> dict[str, Any]:
        if self.repair.rounds == 0:
            self.verified_before_repair = len(self.stats.get("accepted", []))
        outcome = self.repair.round(self._pending(), {"TaskTemplate": state["ids"].get("TaskTemplate", [])})
        self._replaced |= set(outcome["replaced"])
        self._repaired |= set(outcome["items"])
        return {}

    def _pending(self) -> dict[str, tuple[str, str]]:
        handled = self.repair.handled if self.repair else set()
        todo = [t for t in self._rejected_tasks() if t not in handled and t not in self._replaced]
        failures: dict[str, tuple[str, str]] = {}
        for aid, req, diag in self.store.blocking_failures(todo):
            failures.setdefault(aid, (req, diag or ""))
        return failures

    def _rejected_tasks(self) -> list[str]:
        rows = self.store.execute(
            "SELECT DISTINCT a.id FROM artifacts a JOIN build_runs b ON a.run_key = b.run_key "
            "WHERE b.build_id = ? AND a.status = 'rejected' AND a.type = 'IETask' ORDER BY a.id",
            [self.executor.build_id]).fetchall()
        return [r[0] for r in rows]

    def _extra_units(self, state: BuildState) -> dict[str, int]:
        """More scene units when a scene type or difficulty is short of its target (measured yield)."""
        if state.get("topups", 0) >= MAX_TOPUPS:
            return {}
        bp = self._blueprint()
        have = self._have()
        short = [(t, d) for t, row in bp.targets.items() for d, n in row.items()
                 if have.get((t, d), 0) < n * (1 - bp.composition_tolerance)]
        if not short:
            return {}
        ratios = [have.get((t, d), 0) / bp.targets[t][d] for t, d in short if bp.targets[t][d]]
        worst = min(ratios) if ratios else 0.0
        if worst <= 0.0 and state.get("topups", 0) > 0:
            return {}  # more units gave none of it before: the scenes cannot make it
        units = state["units"]
        grown = {i: n + max(math.ceil(n / 4), math.ceil(n * (1.0 / max(worst, 0.25) - 1.0) * 1.2))
                 for i, n in units.items() if not bp.sources[int(i)].get("scenes_given")}
        return grown

    def _have(self) -> dict[tuple[str, str], int]:
        have: dict[tuple[str, str], int] = {}
        for tid in self.stats.get("accepted", []):
            t = self.executor.load(tid)
            key = (t.scene_type, "hard" if t.subtasks >= 2 else "simple")
            have[key] = have.get(key, 0) + 1
        return have

    def _blueprint(self):
        return self.executor.load(self.results["blueprint"].verified[0])

    # -- the track runner protocol ------------------------------------------------------------

    def summary(self, state: dict[str, Any]) -> dict[str, Any]:
        accepted = self.stats.get("accepted", [])
        pkg = self.executor.load(self.package_id(state))
        out = {
            "tasks_candidates": len(self.results.get("synthesize", NodeResult()).verified)
                                + len(self.results.get("synthesize", NodeResult()).rejected),
            "tasks_accepted": len(accepted), "tasks_rejected": len(self.stats.get("rejected", [])),
            "tasks_released": pkg.counts.get("tasks", 0), "items_accepted": len(accepted),
            "items_released": pkg.counts.get("tasks", 0),
            "items_not_needed": max(0, len(accepted) - pkg.counts.get("tasks", 0)),
            "artifacts_repaired": len(self._replaced), "gates": self.log.counts,
        }
        if self.repair is not None:
            out["repair"] = self.repair.summary(set(accepted), self.verified_before_repair)
        return out


IE_TRACK = Track(
    name="ie", description="Interactive Embodied: restorable tasks with compiled verifiers, run as episodes",
    roles=ROLES, source_roles=SOURCE_ROLES, defaults=DEFAULTS, runner=IERunner, section="ie", section_model=IESpec,
    node_params=node_params, node_fanout=node_fanout,
    repair_skills={"local_field_item": "ie.repair.local_field_task", "resynthesize_item": "ie.repair.resynthesize_task"},
    # The IE failures and the smallest operator that restores each (escalation for a repeated symptom).
    repair_routes={"instruction_goal_mismatch": ("candidate_resynthesis", None),
                   "placeholder_instruction": ("local_field_repair", "skill_reexecution"),
                   "split_inconsistent": ("local_field_repair", "skill_reexecution"),
                   "non_executable_verifier": ("skill_reexecution", None),
                   "restore_failure": ("upstream_rollback", None)},
    item_type="IETask",
    summary_rows=(("tasks_candidates", "tasks candidates"), ("tasks_rejected", "tasks rejected"),
                  ("tasks_accepted", "tasks accepted"), ("tasks_released", "tasks released"),
                  ("items_not_needed", "tasks accepted, not needed")),
)
register("track", "ie", IE_TRACK)
