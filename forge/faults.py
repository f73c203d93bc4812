"""Fault plans: a testing seam of the engine that plants defects in a real build.

A plan names, per fault, the producing skill whose outputs it corrupts, which outputs (a
rate drawn from the output's identity, field filters and a limit), and a registered mutator. An
output carries one planted defect at most (the first fault of the plan that applies to it), so
its diagnosis names the defect planted. Faults apply only to first productions, never to repair
invocations. A planted artifact gets an id
of its own and its run records the plan, so planted artifacts never masquerade as clean
ones: a build under another plan (or none) executes that run again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from forge.artifact_types import ArtifactContent
from forge.errors import DefinitionError
from forge.keys import digest
from forge.registry import view

Mutator = Callable[[ArtifactContent, "FaultContext"], ArtifactContent | None]
MUTATORS: Mapping[str, Mutator] = view("fault_mutator")


def mutator(name: str) -> Callable[[Mutator], Mutator]:
    def decorate(fn: Mutator) -> Mutator:
        from forge.registry import register

        register("fault_mutator", name, fn, origin=f"{fn.__module__}.{fn.__qualname__}")
        return fn
    return decorate


@dataclass(frozen=True)
class Fault:
    kind: str
    skill: str
    rate: float = 1.0
    where: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None  # at most this many outputs
    seed: int = 0


@dataclass
class FaultContext:
    store: Any
    load: Callable[[str], ArtifactContent]
    input_ids: dict[str, Any]


class FaultPlan:
    def __init__(self, faults: list[Fault]) -> None:
        from forge.registry import load_plugins

        load_plugins()  # plugins register their mutators on import

        unknown = [f.kind for f in faults if f.kind not in MUTATORS]
        if unknown:
            raise DefinitionError(f"unknown fault kinds {unknown}; known: {sorted(MUTATORS)}")
        self.faults = faults
        self.injected: list[dict[str, Any]] = []
        self._counts: dict[int, int] = {}

    def key_for(self, skill: str) -> str | None:
        mine = [f for f in self.faults if f.skill == skill]
        return digest([f.__dict__ for f in mine]) if mine else None

    def apply(self, inv: Any, outputs: list[Any], executor: Any) -> list[Any]:
        skill = inv.node.skill.name
        for i, fault in enumerate(self.faults):
            if fault.skill != skill:
                continue
            for out in outputs:
                if fault.limit is not None and self._counts.get(i, 0) >= fault.limit:
                    break
                if "fault" in out.metadata:  # one planted defect per output: its diagnosis names it
                    continue
                if any(getattr(out.content, k, None) != v for k, v in fault.where.items()):
                    continue
                draw = int(digest(fault.seed, fault.kind, inv.run_key, out.key, length=8), 16) / 16 ** 8
                if draw >= fault.rate:
                    continue
                changed = MUTATORS[fault.kind](out.content, FaultContext(executor.store, executor.load, inv.inputs))
                if changed is None:
                    continue
                out.content = changed
                out.metadata = {**out.metadata, "fault": fault.kind}
                self._counts[i] = self._counts.get(i, 0) + 1
                self.injected.append({"kind": fault.kind, "skill": skill,
                                      "artifact": digest(inv.run_key, out.key, f"fault:{fault.kind}", length=32)})
        return outputs
