"""Skills: typed functions that turn input artifacts into output artifacts.

A skill is a plain function with a small decorator::

    @skill("structure.rendered_evidence", stage="S3")
    def tabletop_evidence(ctx: SkillContext, source: SourceRecord) -> list[EvidenceRecord]:
        ...

Its signature declares its artifact types: a parameter annotated ``T`` is called once per
artifact of type ``T`` (several such parameters form their cross product); one annotated
``list[T]`` receives all artifacts of type ``T`` at once. The return annotation ``list[T]``
names the output type. Skills are discovered from the plugins of the ``forge.skills``
entry-point group (the built-in skills are one of them).
"""

from __future__ import annotations

import importlib.util
import json
import inspect
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
from pydantic import BaseModel

from forge.artifact_types import ArtifactContent
from forge.codeversion import data_files_version, data_identity, module_version, register_project_package
from forge.errors import DefinitionError, PrerequisiteError
from forge.keys import canonical_json, digest
from forge.registry import entries, register, registered_code, view

LOCATION = {"location": True}  # a parameter field that says where a file is (see ``SkillSpec.key_params``)

STAGES = ("S1", "S2", "S3", "S4", "S5")
STAGE_NAMES = {
    "S1": "blueprint", "S2": "collect", "S3": "structure", "S4": "synthesize", "S5": "verify+package",
}


@dataclass(frozen=True)
class InputSpec:
    name: str
    type: str
    many: bool


@dataclass
class Output:
    """One produced artifact; ``key`` tells fan-out outputs of one invocation apart."""

    content: ArtifactContent
    key: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class SkillSpec:
    name: str
    stage: str
    fn: Callable[..., Any]
    inputs: tuple[InputSpec, ...]
    output: str
    params_model: type[BaseModel] | None
    requires: tuple[str, ...]
    reads: Callable[[dict[str, Any]], dict[str, str]] | None
    expand: Callable[..., list[dict[str, Any]]] | None
    applies: Callable[..., bool] | None
    description: str
    parallel: bool = False
    consults: tuple[str, ...] = ()  # registry kinds whose registered code the skill runs (see ``skill``)
    pool_from: int = 2  # the fewest invocations worth starting worker processes for
    keep_outputs: bool = True  # outputs stay in the driver's memory for the steps that read them next
    # inputs -> a key: invocations sharing one run one after another (a held scene serves them all)
    affinity: Callable[..., str] | None = None

    @property
    def module(self) -> str:
        return self.fn.__module__

    def module_version(self) -> str:
        return module_version(self.module)

    def data_files(self, params: dict[str, Any]) -> dict[str, dict[str, str]]:
        files = dict(self.reads(params)) if self.reads else {}
        for kind in self.consults:
            for name in sorted(entries(kind)):
                files.update(registered_code(kind, name))
        return data_files_version(files) if files else {}

    def code_version(self, params: dict[str, Any]) -> str:
        return digest(self.module_version(), data_identity(self.data_files(params)))

    def key_params(self, valid: dict[str, Any]) -> dict[str, Any]:
        """The validated parameters that make a run what it is: a field marked as a location
        (``Field(json_schema_extra=LOCATION)``) says where a file is, not what it holds (the
        data files' hashes stand for that), so moving a folder changes no run key and no id."""
        if self.params_model is None:
            return valid
        where = {name for name, f in self.params_model.model_fields.items()
                 if isinstance(f.json_schema_extra, dict) and f.json_schema_extra.get("location")}
        return {k: v for k, v in valid.items() if k not in where} if where else valid

    def validate_params(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.params_model is None:
            if params:
                raise DefinitionError(f"skill {self.name!r} takes no parameters, got {sorted(params)}")
            return {}
        try:
            return self.params_model.model_validate(params).model_dump(mode="json")
        except Exception as exc:  # pydantic.ValidationError
            raise DefinitionError(f"skill {self.name!r}: invalid parameters: {exc}") from None

    def check_requirements(self) -> None:
        for module in self.requires:
            found, why = module_available(module)
            if not found:
                raise PrerequisiteError(
                    f"skill {self.name!r} needs the Python module {module!r}, which is not importable here ({why})",
                    hint=f"pip install {module}",
                )


def module_available(module: str) -> tuple[bool, str]:
    """Whether ``module`` can be imported here, without importing it."""
    try:
        return (importlib.util.find_spec(module) is not None), "not found"
    except (ImportError, ValueError) as exc:
        return False, str(exc)


_HELD: dict[str, Any] = {}


def held(key: str, factory: Callable[[], Any]) -> Any:
    """A resource this process keeps between invocations (a simulator client): a pool worker or
    a Ray actor starts it once and reuses it. Whoever uses it starts by resetting it, so what an
    earlier invocation left behind never shows in a later one's output."""
    if key not in _HELD:
        if not _HELD:
            import atexit

            atexit.register(_close_held)
        _HELD[key] = factory()
    return _HELD[key]


def _close_held() -> None:
    for resource in _HELD.values():
        close = getattr(resource, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # the process is ending; nothing to report to
                pass
    _HELD.clear()


class SkillContext:
    """What a running skill may use: its parameters, a seeded RNG, the blob store and the
    resources its process holds (``held``)."""

    def __init__(self, spec: SkillSpec, params: dict[str, Any], run_key: str, store: Any, input_ids: dict[str, Any],
                 loader: Callable[[str], ArtifactContent] | None = None):
        self.spec = spec
        self._loader = loader
        # Parameters as the store keeps them (canonical JSON: sorted keys), so a run made again
        # from its record (a damaged blob re-created) sees them in the same order and writes the
        # same bytes.
        params = json.loads(canonical_json(params)) if params else params
        self.params = spec.params_model.model_validate(params) if spec.params_model else None
        self.run_key = run_key
        self.store = store
        self.input_ids = input_ids
        self.blobs: list[str] = []  # blobs this run wrote: recorded with the run, so a damaged one can be re-made
        # Randomness is seeded from the invocation identity: a rebuild reproduces the content.
        self.rng = np.random.default_rng(int(run_key[:16], 16))

    def held(self, key: str, factory: Callable[[], Any]) -> Any:
        return held(key, factory)

    def load(self, artifact_id: str) -> ArtifactContent:
        """Read an artifact of the input's lineage (repair operators re-derive from evidence)."""
        if self._loader is None:
            raise RuntimeError(f"skill {self.spec.name!r}: no artifact loader in this process")
        return self._loader(artifact_id)

    def put_png(self, rgb: np.ndarray) -> str:
        return self._wrote(self.store.put_png(rgb))

    def _wrote(self, digest_: str) -> str:
        self.blobs.append(digest_)
        return digest_

    def get_image(self, digest_: str) -> np.ndarray:
        return self.store.get_image(digest_)

    def put_arrays(self, arrays: dict[str, np.ndarray]) -> str:
        return self._wrote(self.store.put_arrays(arrays))

    def get_arrays(self, digest_: str) -> dict[str, np.ndarray]:
        return self.store.get_arrays(digest_)

    def put_blob(self, data: bytes) -> str:
        return self._wrote(self.store.put_blob(data))

    def get_blob(self, digest_: str) -> bytes:
        return self.store.get_blob(digest_)


class SkillRegistry:
    def __init__(self, skills: Any = None) -> None:
        # The process-wide registry is the view of the one registry's skills; others (a planner
        # test's own) keep theirs.
        self._skills: Any = {} if skills is None else skills

    def add(self, spec: SkillSpec) -> None:
        existing = self._skills.get(spec.name)
        if existing and existing.fn.__qualname__ != spec.fn.__qualname__:
            raise DefinitionError(
                f"skill name {spec.name!r} is registered twice ({existing.module} and {spec.module})"
            )
        if self is REGISTRY:  # a module loaded again replaces its skills under their names
            register("skill", spec.name, spec, origin=spec.module, replace=True)
        else:
            self._skills[spec.name] = spec

    def get(self, name: str) -> SkillSpec:
        try:
            return self._skills[name]
        except KeyError:
            raise DefinitionError(f"unknown skill {name!r}; known: {sorted(self._skills)}") from None

    def __iter__(self):
        return iter(sorted(self._skills.values(), key=lambda s: (s.stage, s.name)))

    def __contains__(self, name: str) -> bool:
        return name in self._skills

    def producers_of(self, type_name: str) -> list[SkillSpec]:
        return [s for s in self if s.output == type_name]


REGISTRY = SkillRegistry(view("skill"))


def skill(
    name: str,
    *,
    stage: str,
    params: type[BaseModel] | None = None,
    requires: Iterable[str] = (),
    reads: Callable[[dict[str, Any]], dict[str, str]] | None = None,
    expand: Callable[..., list[dict[str, Any]]] | None = None,
    applies: Callable[..., bool] | None = None,
    parallel: bool = False,
    pool_from: int = 2,
    keep_outputs: bool = True,
    consults: Iterable[str] = (),
    affinity: Callable[..., str] | None = None,
    registry: SkillRegistry | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as a skill. See the module docstring for the signature rules.

    ``reads(params)`` maps stable labels to the data files an invocation reads (hashed into
    its code version);
    ``expand(**inputs)`` yields one parameter set per invocation for the given inputs;
    ``applies(**inputs)`` skips input combinations the skill does not apply to;
    ``parallel`` lets the executor spread invocations over worker processes; ``pool_from``: the
    fewest invocations worth starting them for (a batch of a cheap skill smaller than that runs
    in the driver unless the workers are already running); ``keep_outputs=False``: outputs are
    recorded and not held in the driver's memory, for a skill whose outputs are many and mostly
    unread (a later step loads the ones it takes from the store); ``consults``: registry kinds
    whose entries the skill looks up and runs (a plugin's scoring protocols): their source files
    count as files every invocation reads, so editing one reruns it and ``forge status`` names it;
    ``affinity(**inputs)``: a key under which invocations are run one after another, so that what a
    worker holds for one (a simulator scene that takes seconds to build) serves the next.
    """
    if stage not in STAGES:
        raise DefinitionError(f"skill {name!r}: stage must be one of {STAGES}, got {stage!r}")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        inputs, output = _signature_types(name, fn)
        spec = SkillSpec(
            name=name, stage=stage, fn=fn, inputs=inputs, output=output, params_model=params,
            requires=tuple(requires), reads=reads, expand=expand, applies=applies,
            description=(inspect.getdoc(fn) or "").split("\n")[0], parallel=parallel,
            pool_from=pool_from, keep_outputs=keep_outputs, consults=tuple(consults), affinity=affinity,
        )
        (registry or REGISTRY).add(spec)
        register_project_package(fn.__module__)
        fn.skill_spec = spec  # type: ignore[attr-defined]
        return fn

    return decorate


def _signature_types(name: str, fn: Callable[..., Any]) -> tuple[tuple[InputSpec, ...], str]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:
        raise DefinitionError(f"skill {name!r}: cannot resolve type annotations: {exc}") from None
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].name != "ctx":
        raise DefinitionError(f"skill {name!r}: the first parameter must be `ctx: SkillContext`")
    inputs = []
    for p in params[1:]:
        ann = hints.get(p.name)
        many = typing.get_origin(ann) is list
        inner = typing.get_args(ann)[0] if many else ann
        if not (inspect.isclass(inner) and issubclass(inner, ArtifactContent)):
            raise DefinitionError(
                f"skill {name!r}: parameter {p.name!r} must be annotated with an artifact type or a list of one"
            )
        inputs.append(InputSpec(p.name, inner.TYPE, many))
    ret = hints.get("return")
    if typing.get_origin(ret) is not list or not issubclass(typing.get_args(ret)[0], ArtifactContent):
        raise DefinitionError(f"skill {name!r}: the return annotation must be list[ArtifactType]")
    return tuple(inputs), typing.get_args(ret)[0].TYPE


def discover(registry: SkillRegistry | None = None) -> SkillRegistry:
    """Load every plugin of the ``forge.skills`` entry-point group (the built-in skills are one),
    once; their skills register as they are imported."""
    from forge.registry import load_plugins

    load_plugins()
    return registry or REGISTRY
