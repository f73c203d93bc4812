"""The model layer: roles on OpenAI-compatible endpoints (or built-in backends), one client with
typed outputs, retries and budgets, a response cache and token accounting in the store, and a
loopback server for tests. It names no track, capability or question type.

    config      ModelRole, ModelRoles: the intent's ``models:`` section
    prompt      messages, images as data URLs, prompt hashes, output parsing
    client      ModelClient.ask / ask_many -> Answer
    cache       the response cache; judgments_by_model, stale, invalidate
    accounting  usage per role and stage; tokens_per_item
    builtin     Backend, BuiltinBackend, resolve: roles without an endpoint
    loopback    LoopbackServer, Reply: a real OpenAI-compatible HTTP server on 127.0.0.1
"""

# Lazy: importing the intent schema (which holds ``ModelRoles``) must not import the OpenAI client.
_EXPORTS = {
    "tokens_per_item": "accounting", "usage": "accounting", "Backend": "builtin", "BuiltinBackend": "builtin",
    "resolve": "builtin", "invalidate": "cache", "judgments_by_model": "cache", "stale": "cache",
    "Answer": "client", "ModelClient": "client", "Question": "client", "ModelRole": "config", "ModelRoles": "config",
    "ModelError": "errors", "ModelKeyError": "errors", "ModelOutputError": "errors", "ModelRequestError": "errors",
    "ModelUnavailableError": "errors", "TokenBudgetError": "errors",
}


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f"forge.models.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'forge.models' has no attribute {name!r}")


__all__ = [
    "Answer", "Backend", "BuiltinBackend", "ModelClient", "ModelError", "ModelKeyError", "ModelOutputError",
    "ModelRequestError", "ModelRole", "ModelRoles", "ModelUnavailableError", "Question", "TokenBudgetError",
    "invalidate", "judgments_by_model", "resolve", "stale", "tokens_per_item", "usage",
]
