"""Invocation identity: one call of a skill on concrete input artifacts and parameters.

Its ``run_key`` hashes (engine format, skill, code version, parameters, input ids); each output
artifact's id hashes (run key, output key). The same inputs and code always give the same keys,
so a run already stored is found again instead of executed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from forge import ENGINE_FORMAT_VERSION
from forge.codeversion import data_identity
from forge.keys import canonical_json, digest
from forge.skills import SkillSpec


@dataclass
class WorkflowNode:
    """A skill placed in a build's workflow, with the parameters the planner gave it."""

    role: str
    skill: SkillSpec
    params: dict[str, Any]
    fanout: list[dict[str, Any]] | None = None  # one invocation per parameter set, per input combination
    source: int | None = None  # the intent source this node collects or structures (None: shared by all)

    @property
    def stage(self) -> str:
        return self.skill.stage


@dataclass
class Invocation:
    node: WorkflowNode
    inputs: dict[str, Any]  # parameter name -> artifact id, or list of ids
    params: dict[str, Any]
    run_key: str
    module_version: str
    data_files: dict[str, dict[str, str]]
    # Set for repair invocations: which repair this is. It enters the run key, so a repair
    # gives a new version instead of the stored one, and it is recorded on every output.
    repair: dict[str, Any] | None = None
    # Seeds the skill's RNG; a re-executed producer reuses its original run's seed.
    seed_key: str | None = None

    @property
    def input_ids(self) -> list[str]:
        out: list[str] = []
        for v in self.inputs.values():
            out.extend(v if isinstance(v, list) else [v])
        return out


def make_invocation(node: WorkflowNode, inputs: dict[str, Any], params: dict[str, Any], *,
                    repair: dict[str, Any] | None = None, module_version: str | None = None,
                    seed_key: str | None = None) -> Invocation:
    """One invocation of ``node`` on explicit inputs, with its run key."""
    return InvocationMaker(node, module_version)(inputs, params, repair=repair, seed_key=seed_key)


class InvocationMaker:
    """Invocations of one node over many input combinations: each distinct parameter set is
    validated, and the run key's part before the inputs hashed, once (a one-template rebuild plans
    54,000 bindings at 10,000 items, nearly all with the same parameters). The keys are those
    ``digest(ENGINE_FORMAT_VERSION, skill, code version, params less locations, inputs[, repair])``
    gives."""

    def __init__(self, node: WorkflowNode, module_version: str | None = None) -> None:
        self.node = node
        self.module_version = module_version or node.skill.module_version()
        self._bases: dict[str, tuple[dict[str, Any], dict[str, dict[str, str]], Any]] = {}

    def _basis(self, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, dict[str, str]], Any]:
        spec = self.node.skill
        valid = spec.validate_params(params)
        data_files = spec.data_files(valid)
        code_version = digest(self.module_version, data_identity(data_files))
        prefix = hashlib.sha256()
        for part in (ENGINE_FORMAT_VERSION, spec.name, code_version, spec.key_params(valid)):
            _add(prefix, part)
        return valid, data_files, prefix

    def __call__(self, inputs: dict[str, Any], params: dict[str, Any], *, repair: dict[str, Any] | None = None,
                 seed_key: str | None = None) -> Invocation:
        try:
            seen = canonical_json(params)
        except TypeError:  # not JSON: validation says what is wrong with it
            seen = None
        basis = self._bases.get(seen) if seen is not None else None
        if basis is None:
            basis = self._basis(params)
            if seen is not None:
                self._bases[seen] = basis
        valid, data_files, prefix = basis
        h = prefix.copy()
        _add(h, inputs)
        if repair:
            _add(h, {"repair": repair})
        return Invocation(self.node, inputs, valid, h.hexdigest()[:32], self.module_version, data_files, repair,
                          seed_key)


def _add(h: Any, part: Any) -> None:
    """One part of a key, as ``digest`` adds it."""
    h.update(canonical_json(part).encode())
    h.update(b"\x1f")
