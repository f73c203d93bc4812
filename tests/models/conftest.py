"""Fixtures for the model layer: a real store in tmp_path and real loopback servers."""

from __future__ import annotations

from typing import Iterator

import pytest

from forge.models import ModelClient
from forge.models.loopback import LoopbackServer
from forge.store import Store


@pytest.fixture
def store(tmp_path) -> Iterator[Store]:
    with Store(tmp_path / "store") as s:
        yield s


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer() as s:
        yield s


@pytest.fixture
def client(store: Store) -> Iterator[ModelClient]:
    with ModelClient(store, build_id="b1", seed=0) as c:
        yield c
