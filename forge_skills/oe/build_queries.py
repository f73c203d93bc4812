"""What the OE runner asks the store about its own build: the failures repair has yet to handle
(a contract's or the blind gate's), and the artifacts verified or rejected in it."""

from __future__ import annotations

from forge_skills.oe.verify.gates import GATE_C1


class BuildQueries:
    """The OE runner's queries of this build's artifacts (mixed into StageRunner)."""

    def _pending_failures(self) -> dict[str, tuple[str, str]]:
        handled = self.repair.handled if self.repair else set()
        rows = self.store.execute(
            "SELECT DISTINCT a.id, a.type, json_extract_string(a.content, '$.template') FROM artifacts a "
            "JOIN build_runs b ON a.run_key = b.run_key WHERE b.build_id = ? AND a.status = 'rejected'",
            [self.executor.build_id]).fetchall()
        disabled = {t for t, ok in self.grey.items() if not ok}
        todo = [aid for aid, _, template in rows if aid not in handled and template not in disabled]
        failures: dict[str, tuple[str, str]] = {}
        for aid, req, diag in self.store.blocking_failures(todo):
            failures.setdefault(aid, (req, diag or ""))
        for template, report in self.blind_reports.items():
            if report.get("flagged"):
                detail = (f"blind solver {report['best_solver']} scored {report['best_accuracy']:.2f} "
                          f"against chance {report['chance']:.2f}")
                for iid in self.item_stats.get("blind_held", []):
                    if self.executor.load(iid).template == template and iid not in handled:
                        failures[iid] = (GATE_C1.value, detail)
        return failures

    def _verified_in_build(self) -> int:
        return self.store.one(
            "SELECT count(DISTINCT a.id) FROM artifacts a JOIN build_runs b ON a.run_key = b.run_key "
            "WHERE b.build_id = ? AND a.status = 'verified'", [self.executor.build_id])[0]

    def _rejected_in_build(self, type_name: str) -> list[str]:
        rows = self.store.execute(
            "SELECT DISTINCT a.id FROM artifacts a JOIN build_runs b ON a.run_key = b.run_key "
            "WHERE b.build_id = ? AND a.status = 'rejected' AND a.type = ? ORDER BY a.id",
            [self.executor.build_id, type_name]).fetchall()
        return [r[0] for r in rows]
