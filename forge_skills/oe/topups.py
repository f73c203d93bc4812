"""How the OE runner sizes its sources: more units when the bindings or, after the gates, the
accepted items fall short of a capability's target, grown by the yield measured in the build."""

from __future__ import annotations

import math
from typing import Any

from forge.stagegraph import BuildState
from forge_skills.oe.verify.gates import expected_yield, source_quotas, split_targets

# Synthesis realizes this much more than the targets ask, to absorb rejections at the gates.
HEADROOM = 1.15
MAX_TOPUPS = 4  # routes back for more units, per build


class TopUps:
    """The OE runner's top-ups (mixed into StageRunner: reads its blueprint, sources and item stats)."""

    def _growable(self, state: BuildState) -> dict[str, int]:
        """Units per source that may grow: not when the source decides its own count (a folder)
        or the intent gives it, nor after MAX_TOPUPS top-ups."""
        if state.get("topups", 0) >= MAX_TOPUPS:
            return {}
        bp = self._blueprint()
        return {i: n for i, n in state["units"].items()
                if not bp.sources[int(i)].get(self.scales[int(i)]["field"] + "_given")}

    def _extra_units(self, binding_ids: list[str], state: BuildState) -> dict[str, int]:
        """More units per source when some capability has fewer bindings than its target needs."""
        growable = self._growable(state)
        if not growable:
            return {}
        bp = self._blueprint()
        have = expected_yield(self._binding_summaries(binding_ids))
        ratios = [have.get(c, 0) / (t * HEADROOM) for c, t in bp.capability_targets.items() if t > 0]
        worst = min(ratios, default=1.0)
        if worst >= 1.0:
            return {}
        if worst <= 0.0:
            return {}  # no unit yields this capability at all; more of them will not help
        # The bindings are counted, so the gap is known before any item is made: grow by it with a
        # margin, not by a fixed share (a quarter more for a 3% gap rendered 160 scenes to need 25).
        return {i: max(math.ceil(u / 20), min(u, math.ceil(u * (1.0 / worst - 1.0) * 1.25)))
                for i, u in growable.items()}

    def _shortfall_text(self) -> str:
        """The capabilities still short after the gates, as accepted/target."""
        bp = self._blueprint()
        have = self._accepted_per_capability(self.item_stats.get("accepted", []))
        return ", ".join(f"{c} {have.get(c, 0)}/{t}" for c, t in sorted(bp.capability_targets.items())
                         if have.get(c, 0) < t * (1 - bp.composition_tolerance))

    def _units_for_shortfall(self, state: BuildState) -> dict[str, int]:
        """More source units when, after every gate and refill, a capability is still short and
        each unit has been seen to yield some of it (yield per unit measured on this build). With
        items set per source, each source is measured against its own share."""
        growable = self._growable(state)
        if not growable:
            return {}
        bp = self._blueprint()
        accepted = self.item_stats.get("accepted", [])
        quotas = source_quotas(bp)
        kind_of = self._evidence_sources(state)
        if quotas is None:
            if len(self.source_kinds) == 1:
                return self._grow(growable, self._accepted_per_capability(accepted), bp.capability_targets,
                                  bp.composition_tolerance)
            return self._grow_shared(growable, accepted, kind_of, bp)
        out: dict[str, int] = {}
        for kind, targets in split_targets(bp.capability_targets, quotas).items():
            index = str(self.source_kinds.index(kind))
            if index not in growable:
                continue
            own = [i for i in accepted if kind_of.get(self.executor.load(i).evidence) == kind]
            out.update(self._grow({index: growable[index]}, self._accepted_per_capability(own), targets,
                                  bp.composition_tolerance))
        return out

    def _grow_shared(self, growable: dict[str, int], accepted: list[str], kind_of: dict[str, str],
                     bp: Any) -> dict[str, int]:
        """Sources sharing the items: each growable source grows by what it has been seen to
        yield of the capabilities still short overall (a capability only other sources show
        never grows it)."""
        have = self._accepted_per_capability(accepted)
        short = {c: t - have.get(c, 0) for c, t in bp.capability_targets.items()
                 if t > 0 and have.get(c, 0) < t * (1 - bp.composition_tolerance)}
        out: dict[str, int] = {}
        for index, units in growable.items():
            kind = self.source_kinds[int(index)]
            own = self._accepted_per_capability([i for i in accepted
                                                 if kind_of.get(self.executor.load(i).evidence) == kind])
            needs = [gap / own[c] for c, gap in short.items() if own.get(c, 0) > 0]
            if needs:
                out[index] = max(math.ceil(units / 4), min(3 * units, math.ceil(units * max(needs) * 1.2)))
        return out

    def _accepted_per_capability(self, ids: list[str]) -> dict[str, int]:
        have: dict[str, int] = {}
        for iid in ids:
            cap = self.executor.load(iid).capability
            have[cap] = have.get(cap, 0) + 1
        return have

    @staticmethod
    def _grow(growable: dict[str, int], have: dict[str, int], targets: dict[str, int], tol: float) -> dict[str, int]:
        # Capabilities no unit has yielded yet are left out: more units would not help them, and
        # they must not stop the others from growing.
        ratios = [have[c] / t for c, t in targets.items() if t > 0 and 0 < have.get(c, 0) < t * (1 - tol)]
        if not ratios:
            return {}
        return {i: max(math.ceil(u / 4), min(3 * u, math.ceil(u * (1.0 / min(ratios) - 1.0) * 1.2)))
                for i, u in growable.items()}

    def _evidence_sources(self, state: BuildState) -> dict[str, str]:
        """Evidence id -> the kind of the source it was structured from."""
        return {ev: self.source_kinds[int(i)] for i, own in (state.get("source_ids") or {}).items()
                for ev in own.get("EvidenceRecord", [])}
