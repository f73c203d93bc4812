"""Requirement contracts: per artifact type, the requirements an artifact must meet.

A contract file (``contracts/*.yaml``) looks like::

    artifact_type: OEItem
    requirements:
      - id: OE-ITEM-1
        description: question, options, answer, media and scoring are present
        verification: deterministic        # deterministic | execution | model-assisted
        severity: blocking                 # blocking | warning
        check: fields_present              # a registered check
        args: {fields: [question, options]}

Checks are registered callables returning a :class:`CheckResult`-like outcome; they never
decide what blocks. :func:`decide` does, and a model-assisted pass never overrides a failed
deterministic or execution requirement.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from forge.artifact_types import ARTIFACT_TYPES, ArtifactContent
from forge.codeversion import data_files_version, data_identity, module_version
from forge.errors import DefinitionError
from forge.keys import RequirementId, digest, file_digest
from forge.paths import list_files
from forge.registry import view
from forge.yamlfile import CONTRACT_LIMITS, read_yaml

Verification = Literal["deterministic", "execution", "model-assisted"]
Severity = Literal["blocking", "warning"]


class Requirement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    description: str
    verification: Verification
    severity: Severity = "blocking"
    check: str
    args: dict[str, Any] = Field(default_factory=dict)
    # What kind of defect a failure is; diagnosis routes it to a repair operator.
    category: str = "invalid_record"


class ContractFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    artifact_type: str
    requirements: list[Requirement]


@dataclass(frozen=True)
class CheckResult:
    requirement: RequirementId
    artifact_id: str
    passed: bool
    verification: str
    severity: str
    diagnostics: str = ""
    backend: str = "builtin"
    category: str = "invalid_record"


@dataclass
class Outcome:
    """What a check returns: pass/fail and why."""

    passed: bool
    diagnostics: str = ""
    backend: str = "builtin"


CheckFn = Callable[..., Any]
CHECKS: Mapping[str, CheckFn] = view("check")
CHECK_CONSULTS: dict[str, tuple[str, ...]] = {}  # check -> registry kinds whose code it runs


def check(name: str, consults: tuple[str, ...] = ()) -> Callable[[CheckFn], CheckFn]:
    """Register a contract predicate: ``fn(content, ctx, **args) -> bool | Outcome``.
    ``consults``: registry kinds whose entries it looks up and runs; their code is part of the
    contract's version, so editing one re-verifies what the contract covers."""

    def decorate(fn: CheckFn) -> CheckFn:
        from forge.registry import register

        register("check", name, fn, origin=f"{fn.__module__}.{fn.__qualname__}")
        CHECK_CONSULTS[name] = tuple(consults)
        return fn

    return decorate


def _consulted_code(kinds: list[str]) -> dict[str, str]:
    """Hashes of the registered code of every entry of ``kinds``."""
    from forge.registry import entries, registered_code

    files = {label: path for kind in kinds for name in sorted(entries(kind))
             for label, path in registered_code(kind, name).items()}
    return data_identity(data_files_version(files))


class CheckContext:
    """Lets a check look at other artifacts (its lineage) and blobs."""

    def __init__(self, artifact_id: str, load: Callable[[str], ArtifactContent], store: Any) -> None:
        self.artifact_id = artifact_id
        self.load = load
        self.store = store


@dataclass
class Contract:
    artifact_type: str
    requirements: list[Requirement]
    version: str
    files: list[str] = field(default_factory=list)


class ContractBook:
    """All contracts in force for a build, by artifact type."""

    def __init__(self, contracts: dict[str, Contract], tag: str = "") -> None:
        self.contracts = contracts
        # An ablation that changes what is checked tags the versions, so stored verdicts
        # made under other rules are checked again instead of trusted.
        self.tag = tag

    @classmethod
    def load(cls, extra_dirs: list[Path] | None = None) -> "ContractBook":
        from forge.registry import entries

        # Plugins register their checks on import and their contract folders by name.
        files = [f for d in entries("contract_dir").values() for f in sorted(Path(d).glob("*.yaml"))]
        for d in extra_dirs or []:
            if not d.is_dir():
                raise DefinitionError(f"{d}: contract folder not found")
            files += list_files(d, "*.yaml", what="contract folder")
        by_type: dict[str, list[tuple[Path, ContractFile]]] = {}
        for f in files:
            raw = read_yaml(f, CONTRACT_LIMITS, what="contract", error=DefinitionError).data
            try:
                parsed = ContractFile.model_validate(raw)
            except ValidationError as exc:
                first = exc.errors()[0]
                field = ".".join(str(x) for x in first["loc"]) or "(top level)"
                raise DefinitionError(f"{f}: invalid contract: {field}: {first['msg']}") from None
            if parsed.artifact_type not in ARTIFACT_TYPES:
                raise DefinitionError(f"{f}: unknown artifact_type {parsed.artifact_type!r}")
            for req in parsed.requirements:
                if req.check not in CHECKS:
                    raise DefinitionError(f"{f}: requirement {req.id}: unknown check {req.check!r}")
            by_type.setdefault(parsed.artifact_type, []).append((f, parsed))
        contracts = {}
        for type_name, found in by_type.items():
            reqs = [r for _, c in found for r in c.requirements]
            ids = [r.id for r in reqs]
            dup = {i for i in ids if ids.count(i) > 1}
            if dup:
                raise DefinitionError(f"contracts for {type_name}: requirement ids defined twice: {sorted(dup)}")
            check_modules = sorted({CHECKS[r.check].__module__ for r in reqs})
            consulted = sorted({k for r in reqs for k in CHECK_CONSULTS.get(r.check, ())})
            version = digest(
                [file_digest(str(f)) for f, _ in found],
                [module_version(m) if m.startswith("forge_") else m for m in check_modules],
                *([_consulted_code(consulted)] if consulted else []),
            )
            contracts[type_name] = Contract(type_name, reqs, version, [str(f) for f, _ in found])
        return cls(contracts)

    def version(self, type_name: str) -> str:
        c = self.contracts.get(type_name)
        return (c.version if c else "none") + (f"+{self.tag}" if self.tag else "")

    def category(self, requirement_id: str) -> str:
        for c in self.contracts.values():
            for r in c.requirements:
                if r.id == requirement_id:
                    return r.category
        return "invalid_record"

    def evaluate(self, artifact_id: str, content: ArtifactContent, ctx: CheckContext) -> list[CheckResult]:
        contract = self.contracts.get(content.TYPE)
        if contract is None:
            return []
        results: list[CheckResult] = []
        hard_failed = False
        ordered = sorted(contract.requirements, key=lambda r: r.verification == "model-assisted")
        for req in ordered:
            if req.verification == "model-assisted" and hard_failed:
                results.append(CheckResult(RequirementId(req.id), artifact_id, False, req.verification, req.severity,
                                           "not run: a deterministic or execution requirement already failed",
                                           category=req.category))
                continue
            outcome = _run_check(req, content, ctx)
            results.append(CheckResult(RequirementId(req.id), artifact_id, outcome.passed, req.verification,
                                       req.severity, outcome.diagnostics, outcome.backend, req.category))
            if not outcome.passed and req.severity == "blocking" and req.verification != "model-assisted":
                hard_failed = True
        return results


def _run_check(req: Requirement, content: ArtifactContent, ctx: CheckContext) -> Outcome:
    fn = CHECKS[req.check]
    try:
        value = fn(content, ctx, **req.args)
    except Exception as exc:  # a check that cannot run is a failed check, with the reason kept
        return Outcome(False, f"check {req.check!r} raised {type(exc).__name__}: {exc}")
    if isinstance(value, Outcome):
        return value
    if isinstance(value, tuple):
        return Outcome(bool(value[0]), str(value[1]))
    return Outcome(bool(value))


def decide(results: list[CheckResult]) -> Literal["verified", "rejected"]:
    """The engine's verdict. Any failed blocking requirement rejects the artifact; a passing
    model-assisted result never rescues a failed deterministic or execution requirement."""
    hard_fail = any(not r.passed and r.severity == "blocking" and r.verification != "model-assisted" for r in results)
    if hard_fail:
        return "rejected"
    model_fail = any(not r.passed and r.severity == "blocking" for r in results)
    return "rejected" if model_fail else "verified"


# -- generic checks usable by any contract ------------------------------------------------


@check("fields_present")
def fields_present(content: ArtifactContent, ctx: CheckContext, fields: list[str]) -> Outcome:
    missing = [f for f in fields if getattr(content, f, None) in (None, "", [], {})]
    return Outcome(not missing, f"missing or empty: {missing}" if missing else "")


_SAFE_BUILTINS = {"len": len, "all": all, "any": any, "min": min, "max": max, "set": set, "sorted": sorted,
                  "abs": abs, "sum": sum, "round": round, "str": str, "int": int, "float": float}


@check("expr")
def expr(content: ArtifactContent, ctx: CheckContext, expression: str, message: str = "") -> Outcome:
    """A Python expression over ``c`` (the content) with a few safe builtins."""
    value = eval(expression, {"__builtins__": _SAFE_BUILTINS}, {"c": content})  # noqa: S307 - contract authors only
    return Outcome(bool(value), "" if value else (message or f"expression is false: {expression}"))


def describe_checks() -> dict[str, str]:
    return {name: (inspect.getdoc(fn) or "").split("\n")[0] for name, fn in sorted(CHECKS.items())}
