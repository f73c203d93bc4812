"""Errors of the model layer, each naming the role, the endpoint (base URL and model) and the
artifact it was working on.

    ForgeError
    +-- ModelError               a model call did not give a usable answer
    |   +-- ModelUnavailableError  429, 5xx, timeouts or connection errors outlasted the retries
    |   +-- ModelRequestError      the server refused the request (a 4xx other than 429)
    |   +-- ModelOutputError       the replies stayed invalid after the bounded validation retries
    |   +-- TokenBudgetError       the role's token budget would be or was exceeded
    +-- PrerequisiteError
        +-- ModelKeyError        the environment variable named by ``api_key_env`` is not set
"""

from __future__ import annotations

from forge.errors import ForgeError, PrerequisiteError


class ModelError(ForgeError):
    """A model call failed; ``role``, ``endpoint`` and ``artifact`` say which one."""

    def __init__(self, problem: str, *, role: str, endpoint: str, artifact: str | None,
                 hint: str | None = None) -> None:
        where = f" on artifact {artifact}" if artifact else ""
        super().__init__(f"model role {role!r} at {endpoint}{where}: {problem}", hint=hint)
        self.problem = problem
        self.role = role
        self.endpoint = endpoint
        self.artifact = artifact


class ModelUnavailableError(ModelError):
    pass


class ModelRequestError(ModelError):
    pass


class ModelOutputError(ModelError):
    pass


class TokenBudgetError(ModelError):
    pass


class ModelKeyError(PrerequisiteError):
    """The API key variable of a role is missing; ``variable`` names it."""

    def __init__(self, role: str, endpoint: str, variable: str) -> None:
        super().__init__(f"model role {role!r} at {endpoint}: environment variable {variable} (its api_key_env) "
                         "is not set", hint=f"export {variable}=... before the build, or drop api_key_env for a "
                                            "server that needs no key")
        self.role = role
        self.variable = variable
