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
    +-- StoreError           the store is missing, locked or of another format
    +-- UnknownReferenceError  a REF given on the command line matches nothing (exit 2)
    +-- UsageError           a command given something it cannot work on (exit 2)
        +-- ReviewError      a review page or verdicts file that cannot be made or read
"""

from __future__ import annotations


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


class UnknownReferenceError(ForgeError):
    exit_code = 2


class UsageError(ForgeError):
    """A command was given something it cannot work on (not a package, text with no capability)."""

    exit_code = 2
