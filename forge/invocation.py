"""Invocation identity: one call of a skill on concrete input artifacts and parameters.

Its ``run_key`` hashes (engine format, skill, code version, parameters, input ids); each output
artifact's id hashes (run key, output key). The same inputs and code always give the same keys,
so a run already stored is found again instead of executed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from forge import ENGINE_FORMAT_VERSION
from forge.codeversion import data_identity
from forge.keys import digest
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
    spec = node.skill
    params = spec.validate_params(params)
    module_version = module_version or spec.module_version()
    data_files = spec.data_files(params)
    code_version = digest(module_version, data_identity(data_files))
    key_parts: list[Any] = [ENGINE_FORMAT_VERSION, spec.name, code_version, params, inputs]
    if repair:
        key_parts.append({"repair": repair})
    return Invocation(node, inputs, params, digest(*key_parts, length=32), module_version, data_files, repair,
                      seed_key)
