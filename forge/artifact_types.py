"""Artifact content types: the typed vocabulary skills exchange.

An artifact is ``(type, content, metadata, provenance)``; ``content`` is an instance of an
:class:`ArtifactContent` subclass a plugin defines (registered as ``artifact_type:<class name>``),
serialized as JSON; the engine itself defines only :class:`Package`, what every track releases. Large payloads (PNG media, HDF5 arrays) live in the blob
store and are referenced here by content hash.

``VISIBLE_FIELDS`` names what a model under evaluation may see; everything else is hidden.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from forge.errors import DefinitionError
from forge.registry import load_plugins, register, view


class ArtifactContent(BaseModel):
    model_config = ConfigDict(extra="forbid")

    TYPE: ClassVar[str] = ""
    VISIBLE_FIELDS: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.TYPE = cls.__name__
        # A module loaded again (or a test's class of a taken name) replaces the type under its name.
        register("artifact_type", cls.__name__, cls, origin=cls.__module__, replace=True)

    def summary(self) -> str:
        """One line for `forge audit`: what this artifact is."""
        return self.TYPE


ARTIFACT_TYPES: Mapping[str, type[ArtifactContent]] = view("artifact_type")


def content_type(name: str) -> type[ArtifactContent]:
    if name not in ARTIFACT_TYPES:
        load_plugins()  # a track's types register when its plugin loads
    try:
        return ARTIFACT_TYPES[name]
    except KeyError:
        raise DefinitionError(f"unknown artifact type {name!r}; known: {sorted(ARTIFACT_TYPES)}") from None


class Package(ArtifactContent):
    """A release: file name -> blob hash, counts, and the manifest."""

    name: str
    version: str
    files: dict[str, str]
    counts: dict[str, Any]
    manifest: str
