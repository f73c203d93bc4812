"""The error tree. Every user-facing failure is one of these; the CLI prints it without a
traceback and names the file, field, skill or artifact at fault.

    ForgeError
    +-- IntentError          intent file missing, unparsable or invalid (exit 2)
    +-- DefinitionError      a skill, template, contract, resource or plugin is malformed, or a
    |                        name is registered twice (exit 2)
    |   +-- CompositionError the planner cannot wire the workflow (types, preconditions)
    +-- ContractError        a requirement could not be evaluated
    +-- SkillExecutionError  a skill raised while producing artifacts
    +-- PrerequisiteError    something the build needs is absent (module, simulator, data) (exit 3)
    +-- StoreError           the store cannot be opened or written: damaged, unreadable, no
    |   |                    space, an unwritable package folder (exit 1)
    |   +-- StoreBusyError   another process holds the store (a build writes alone)
    |   +-- BlobError        a blob is missing or damaged (re-made from its run where possible)
    +-- UnknownReferenceError  a REF given on the command line matches nothing (exit 2)
    +-- UsageError           a command given something it cannot work on (exit 2)
        +-- ReviewError      a review page or verdicts file that cannot be made or read

Outside the tree, the CLI turns the machine's own errors (OSError: files, permissions, disk) into
one line and exit 1; `forge verify` and `forge fsck` exit 1 when they find damage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class ForgeError(Exception):
    """Base of all forge errors. ``exit_code`` is what the CLI returns."""

    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class IntentError(ForgeError):
    exit_code = 2


class DefinitionError(ForgeError):
    exit_code = 2


class CompositionError(DefinitionError):
    pass


class ContractError(ForgeError):
    pass


class SkillExecutionError(ForgeError):
    pass


class PrerequisiteError(ForgeError):
    exit_code = 3


class StoreError(ForgeError):
    pass


class StoreBusyError(StoreError):
    """Another process holds the store's lock."""


class BlobError(StoreError):
    """A blob that is missing, unreadable or damaged; ``digest`` names it."""

    def __init__(self, digest: str, problem: str, path: Any) -> None:
        super().__init__(f"blob {digest[:16]} is {problem}: {path}",
                         hint="`forge fsck --repair` re-creates blobs from the skill runs that made them")
        self.digest = digest
        self.problem = problem

    def __reduce__(self):  # crosses process boundaries (pool workers) intact
        return (BlobError, (self.digest, self.problem, Path(self.message.rsplit(": ", 1)[-1])))


class UnknownReferenceError(ForgeError):
    exit_code = 2


class UsageError(ForgeError):
    """A command was given something it cannot work on (not a package, text with no capability)."""

    exit_code = 2
