"""The reference planner: plans that execute, bounded search, clear failures."""

from __future__ import annotations

import pytest

from forge_resources.household import (Goal, HouseholdEnv, PlanNotFound, Subtask, compile_goal, compile_subtasks,
                                       evaluate, plan)

from .conftest import tiny_kitchen


def test_a_plan_slices_heats_and_places():
    env = HouseholdEnv(tiny_kitchen())
    verifier = compile_goal(Goal("pick_heat_then_place_in_recep", "Apple", "CounterTop", object_sliced=True))
    before = env.get_state()
    actions = plan(env, verifier)
    assert env.get_state() == before  # planning does not touch the environment
    names = [a.name for a in actions]
    assert "SliceObject" in names and "ToggleObjectOn" in names
    for action in actions:
        assert env.step(action).valid, action
    assert evaluate(verifier, env.objects())[0]


def test_an_already_met_goal_needs_no_actions():
    env = HouseholdEnv(tiny_kitchen())
    assert plan(env, compile_subtasks([Subtask("Apple", {}, "CounterTop")])) == []


def test_failure_is_bounded_and_says_why():
    env = HouseholdEnv(tiny_kitchen())
    with pytest.raises(PlanNotFound, match="reachable states ran out"):
        plan(env, compile_subtasks([Subtask("Television", {"isToggled": True})]))
    with pytest.raises(PlanNotFound, match="1 expansions were spent") as err:
        plan(env, compile_goal(Goal("pick_cool_then_place_in_recep", "Apple", "CounterTop")), max_expansions=1)
    assert "best progress" in str(err.value)
