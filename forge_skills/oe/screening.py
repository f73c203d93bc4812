"""How the OE runner screens its item pool: contracts (B1), the grey batch (A), the blind panel
(C1) and the holding gates (DUP, DEP, BAL), with the final-stage contracts an ablation defers."""

from __future__ import annotations

from typing import Any

from forge_skills.oe.roles import panel_blind_and_full
from forge_skills.oe.types import OEItem
from forge_skills.oe.verify.balance_gate import GATE_BAL, balance_answers
from forge_skills.oe.verify.dependence_gates import GATE_DEP, GATE_DUP, independent_items, near_duplicates
from forge_skills.oe.verify.gates import GATE_C1, StoreMemo, blind_evaluation, screen_invalid


class Screening:
    """The OE runner's screening of the item pool (mixed into StageRunner)."""

    def _screen(self, pool: list[str]) -> dict[str, Any]:
        """Accepted items of the pool after every S5 gate (also recorded in ``item_stats``)."""
        if self.ablate == "final-stage-only" and not self._final_checked:
            pool = self._final_stage_contracts(pool)
        self.executor.preload(pool)
        items = {i: self.executor.load(i) for i in pool}
        rejected_ids = [a for a in self._rejected_in_build("OEItem") if a not in self._replaced]
        self.executor.preload(rejected_ids)
        failed = self._failed_requirements(rejected_ids)
        rejected = {i: (self.executor.load(i).template, failed.get(i, [])) for i in rejected_ids}
        self.log.forget((GATE_DUP, GATE_DEP, GATE_BAL, GATE_C1))
        passed_b1 = screen_invalid(self.log, items, rejected)
        # Redundant items go first (near duplicates, items whose answers determine each other),
        # so balancing and the blind test see the pool that will be released.
        facts = self.store.fields([items[i].binding for i in passed_b1],
                                  {"scene": "$.scene_index", "view": "$.view", "slots": "$.slots"})
        unique = near_duplicates(self.log, {i: items[i] for i in passed_b1}, facts)
        self.item_stats["duplicates"] = len(passed_b1) - len(unique)
        independent = independent_items(self.log, {i: items[i] for i in unique})
        self.item_stats["dependent"] = len(unique) - len(independent)
        balanced = balance_answers(self.log, {i: items[i] for i in independent}, float(self.gates["blind_margin"]) / 2,
                                   int(self.gates["min_blind_items"]))
        self.item_stats["balance_held"] = len(independent) - len(balanced)
        if self.ablate == "no-blind-eval":
            accepted, self.blind_reports = balanced, {}
        else:
            if self._blind_memo is None:
                self._blind_memo = StoreMemo(self.store)
            replaced = {i: it for i in sorted(self._replaced) if isinstance(it := self.executor.load(i), OEItem)}
            accepted, self.blind_reports = blind_evaluation(self.log, {i: items[i] for i in balanced}, self.gates,
                                                            self._blind_memo, self._repaired_items, replaced)
            self._blind_memo.flush()
            accepted = self._panel(accepted, items)
            for template, report in self.blind_reports.items():
                if report.get("flagged"):
                    self._blind_held[template] = sorted({*self._blind_held.get(template, ()),
                                                         *(i for i in balanced if items[i].template == template)})
        self.item_stats["blind_held"] = sorted(set(balanced) - set(accepted))
        self.item_stats["accepted"] = accepted
        return {i: items[i] for i in accepted}

    def _panel(self, accepted: list[str], items: dict[str, Any]) -> list[str]:
        """C1's model side: the panel answers a sample of each template without media (a template
        it answers well above chance is held back, as for the blind solvers) and, for vision
        members, with media (the full condition's gap)."""
        from forge.registry import lookup

        groups: dict[str, list[tuple[str, Any]]] = {}
        for iid in accepted:
            groups.setdefault(items[iid].template, []).append((iid, items[iid]))
        flagged = panel_blind_and_full(self.models, self.store, groups, self.blind_reports, lookup("scorer", "oe"),
                                       self.gates)
        for template in sorted(flagged):
            report = self.blind_reports[template]
            member = next(n for n, r in report["panel"].items() if r.get("flagged"))
            report.update({"flagged": True, "best_solver": member,
                           "best_accuracy": report["panel"][member]["blind_accuracy"]})
            report["excess"] = report["best_accuracy"] - report["chance"]
            self.log.decide(GATE_C1, template, "Template", template, "fail", report)
            for iid, _ in groups[template]:
                self.log.decide(GATE_C1, iid, "OEItem", template, "fail",
                                {"best_solver": member, "excess": round(report["excess"], 4)})
        return [i for i in accepted if items[i].template not in flagged]

    def _record_verifier(self, doubted: dict[str, str]) -> None:
        """The verifier's failures as model-assisted verification records (advisory: the gate
        decides on them; they never change a deterministic verdict)."""
        if not doubted:
            return
        from forge.store import Batch, now

        role = self.models.single("verifier")
        backend = role.model if role is not None else "builtin"
        batch = Batch()
        ts = now()
        for iid, why in sorted(doubted.items()):
            batch.add("verifications", (iid, "OE-V1", "verifier", "model-assisted", "advisory", False, backend, why, ts))
        self.store.write(batch)

    def _final_stage_contracts(self, pool: list[str]) -> list[str]:
        """Ablation 'final-stage-only': contracts run once, on the finished items only; their
        verdicts and records are stored like any other."""
        from forge.contracts import decide
        from forge.recorder import verification_row
        from forge.store import Batch, now

        self._final_checked = True
        saved, self.executor.checks_enabled = self.executor.checks_enabled, True
        kept = []
        batch = Batch()
        ts = now()
        self.executor.preload(pool)
        for iid in pool:
            item = self.executor.load(iid)
            checks = self.executor.check(iid, item)
            status = decide(checks)
            version = self.executor.contracts.version(item.TYPE)
            batch.verdicts[iid] = (status, version)
            for c in checks:
                batch.add("verifications", verification_row(c, version, ts))
            if status == "verified":
                kept.append(iid)
        self.store.write(batch)
        self.executor.checks_enabled = saved
        return kept

    def _failed_requirements(self, ids: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        if not ids:
            return out
        # Per artifact in requirement order (blocking_failures orders deterministic checks first).
        for aid, req, _ in sorted(self.store.blocking_failures(ids), key=lambda r: (r[0], r[1])):
            out.setdefault(aid, []).append(req)
        return out
