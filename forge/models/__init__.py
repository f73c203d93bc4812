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

from forge.models.accounting import tokens_per_item, usage
from forge.models.builtin import Backend, BuiltinBackend, resolve
from forge.models.cache import invalidate, judgments_by_model, stale
from forge.models.client import Answer, ModelClient, Question
from forge.models.config import ModelRole, ModelRoles
from forge.models.errors import (ModelError, ModelKeyError, ModelOutputError, ModelRequestError,
                                 ModelUnavailableError, TokenBudgetError)

__all__ = [
    "Answer", "Backend", "BuiltinBackend", "ModelClient", "ModelError", "ModelKeyError", "ModelOutputError",
    "ModelRequestError", "ModelRole", "ModelRoles", "ModelUnavailableError", "Question", "TokenBudgetError",
    "invalidate", "judgments_by_model", "resolve", "stale", "tokens_per_item", "usage",
]
