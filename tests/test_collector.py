"""Full collections wait during a long job and the interpreter's pacing returns after it."""

import gc

import pytest

from forge.collector import FULL_EVERY, long_lived_heap


def test_full_collections_are_spaced_inside_and_restored_after():
    before = gc.get_threshold()
    with long_lived_heap():
        inside = gc.get_threshold()
    assert inside[:2] == before[:2] and inside[2] == max(before[2], FULL_EVERY)
    assert gc.get_threshold() == before


def test_pacing_returns_when_the_job_fails():
    before = gc.get_threshold()
    with pytest.raises(RuntimeError):
        with long_lived_heap(500):
            assert gc.get_threshold()[2] == max(before[2], 500)
            raise RuntimeError("stopped")
    assert gc.get_threshold() == before
