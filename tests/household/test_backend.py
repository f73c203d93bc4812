"""The household backend: protocol, state save/restore, preconditions, state effects."""

from __future__ import annotations

import json

import pytest

from forge_resources.household import Action, Environment, HouseholdEnv, Rules
from forge_resources.household.data import DUMP_FLOOR_PLANS, load_dump

from .conftest import needs_data, tiny_kitchen

APPLE, KNIFE, MUG = "Apple|+00.10|+00.95|+00.00", "Knife|-00.10|+00.91|+00.00", "Mug|+00.20|+00.91|+00.10"
COUNTER, FRIDGE, OVEN = "CounterTop|+00.00|+00.90|+00.00", "Fridge|+01.00|+00.00|+00.00", "Microwave|-01.00|+00.90|+00.00"
BASIN, FAUCET, CABINET = "Sink|+00.00|+00.85|+01.00|SinkBasin", "Faucet|+00.00|+00.95|+01.20", "Cabinet|+00.50|+01.80|+00.00"
CUP, BREAD, TOASTER = "Cup|+00.50|+01.75|+00.00", "Bread|+00.30|+00.95|-00.10", "Toaster|-00.50|+00.90|+00.00"


def run(env: HouseholdEnv, *steps: tuple) -> None:
    for name, *args in steps:
        result = env.step(Action(name, tuple(args)))
        assert result.valid, f"{name}{tuple(args)}: {result.message}"


def obj(env: HouseholdEnv, oid: str) -> dict:
    return next(o for o in env.objects() if o["objectId"] == oid)


def test_meets_the_protocol_with_a_typed_action_space():
    env = HouseholdEnv(tiny_kitchen())
    assert isinstance(env, Environment)
    space = {spec.name: spec for spec in env.action_space()}
    assert {"GotoLocation", "GotoObject", "PickupObject", "PutObject", "OpenObject", "CloseObject", "ToggleObjectOn",
            "ToggleObjectOff", "SliceObject", "DropObject"} <= set(space)
    assert space["PutObject"].arg_kinds == ("object", "receptacle")
    assert any("closed" in p for p in space["PickupObject"].preconditions)


def test_state_round_trips_exactly_at_start_mid_episode_and_into_a_fresh_env():
    env = HouseholdEnv(tiny_kitchen())
    start = env.get_state()
    json.dumps(start)  # JSON-serializable
    run(env, ("GotoObject", KNIFE), ("PickupObject", KNIFE), ("SliceObject", APPLE), ("PutObject", KNIFE, COUNTER),
        ("OpenObject", FRIDGE))
    middle = env.get_state()
    env.set_state(middle)
    assert env.get_state() == middle
    fresh = HouseholdEnv()
    fresh.set_state(json.loads(json.dumps(middle)))
    assert fresh.get_state() == middle and fresh.objects() == env.objects()
    env.set_state(start)
    assert env.get_state() == start
    assert not any("AppleSliced" in o["objectId"] for o in env.objects())


@needs_data
@pytest.mark.parametrize("floor_plan", DUMP_FLOOR_PLANS)
def test_state_round_trip_on_real_scenes(floor_plan):
    env = HouseholdEnv(load_dump(floor_plan))
    first = env.valid_actions()[0]
    assert env.step(first).valid
    state = env.get_state()
    other = HouseholdEnv()
    other.set_state(state)
    assert other.get_state() == state and other.objects() == env.objects()


def test_an_invalid_action_changes_nothing_and_says_why():
    env = HouseholdEnv(tiny_kitchen())
    far = env.step(Action("PickupObject", (APPLE,)))
    assert not far.valid and "not within reach" in far.message
    run(env, ("GotoObject", APPLE))
    cases = [(Action("PickupObject", (CUP,)), "closed"),
              (Action("PickupObject", (COUNTER,)), "not pickupable"),
              (Action("SliceObject", (APPLE,)), "Knife"),
              (Action("PutObject", (APPLE, COUNTER)), "does not hold"),
              (Action("CloseObject", (FRIDGE,)), "already closed"),
              (Action("Teleport", ()), "unknown action"),
              (Action("PickupObject", ("Nothing|+00.00|+00.00|+00.00",)), "no object")]
    for action, why in cases:
        before = env.get_state()
        result = env.step(action)
        after = env.get_state()
        assert not result.valid and why in result.message, (action, result.message)
        assert {k: v for k, v in after.items() if k not in ("steps", "invalid", "last")} == \
               {k: v for k, v in before.items() if k not in ("steps", "invalid", "last")}
        assert after["invalid"] == before["invalid"] + 1
        assert "failed" in result.observation.text


def test_valid_actions_are_exactly_those_that_succeed():
    env = HouseholdEnv(tiny_kitchen())
    run(env, ("GotoObject", APPLE))
    state = env.get_state()
    valid = env.valid_actions()
    assert Action("PickupObject", (APPLE,)) in valid and Action("PickupObject", (CUP,)) not in valid
    for action in env.candidate_actions():
        env.set_state(state)
        assert env.step(action).valid == (action in valid), action


def test_the_memoized_legality_scan_agrees_with_stepping_along_a_random_walk():
    """valid_actions memoizes reach, holder and enclosure for one state; stepping does not. Along
    a walk that picks things up, puts them in receptacles and opens and slices, they agree."""
    import random

    env, rng = HouseholdEnv(tiny_kitchen()), random.Random(7)
    held_seen = 0
    for _ in range(25):
        state, valid = env.get_state(), env.valid_actions()
        for action in env.candidate_actions():
            env.set_state(state)
            assert env.step(action).valid == (action in valid), action
        env.set_state(state)
        env.step(rng.choice(valid))
        held_seen += env.world.agents[0].held is not None
    assert held_seen > 0


def test_one_object_in_hand_and_receptacles_follow_alfred_constraints():
    env = HouseholdEnv(tiny_kitchen())
    run(env, ("GotoObject", APPLE), ("PickupObject", APPLE))
    assert not env.step(Action("PickupObject", (MUG,))).valid
    assert "does not take" in env.step(Action("PutObject", (APPLE, TOASTER))).message
    assert "closed" in env.step(Action("PutObject", (APPLE, FRIDGE))).message
    run(env, ("OpenObject", FRIDGE), ("PutObject", APPLE, FRIDGE))
    apple = obj(env, APPLE)
    assert apple["parentReceptacles"] == [FRIDGE] and apple["temperature"] == "Cold" and not apple["isCooled"]
    run(env, ("CloseObject", FRIDGE))
    assert obj(env, APPLE)["isCooled"]
    assert "closed" in env.step(Action("PickupObject", (APPLE,))).message


def test_lenient_rules_accept_any_receptacle_and_repeated_states():
    env = HouseholdEnv(tiny_kitchen(Rules("any", "noop")))
    run(env, ("GotoObject", BREAD), ("PickupObject", BREAD), ("PutObject", BREAD, TOASTER), ("ToggleObjectOn", TOASTER))
    assert obj(env, BREAD)["temperature"] == "Hot"
    assert env.step(Action("ToggleObjectOn", (TOASTER,))).valid  # already on: a valid no-op here
    assert Action("ToggleObjectOn", (TOASTER,)) not in env.valid_actions()


def test_clean_heat_and_slice_effects():
    env = HouseholdEnv(tiny_kitchen())
    run(env, ("GotoObject", MUG), ("DirtyObject", MUG), ("PickupObject", MUG), ("GotoObject", BASIN),
        ("PutObject", MUG, BASIN), ("ToggleObjectOn", FAUCET))
    mug = obj(env, MUG)
    assert mug["isCleaned"] and not mug["isDirty"] and mug["fillLiquid"] == "water"
    run(env, ("ToggleObjectOff", FAUCET), ("PickupObject", MUG), ("GotoObject", OVEN), ("OpenObject", OVEN),
        ("PutObject", MUG, OVEN), ("CloseObject", OVEN), ("ToggleObjectOn", OVEN))
    mug = obj(env, MUG)
    assert mug["isHeated"] and mug["temperature"] == "Hot"
    run(env, ("GotoObject", KNIFE), ("PickupObject", KNIFE), ("SliceObject", APPLE))
    pieces = [o for o in env.objects() if o["objectType"] == "AppleSliced"]
    assert len(pieces) == 3 and all(p["parentReceptacles"] == [COUNTER] and p["pickupable"] for p in pieces)
    whole = obj(env, APPLE)
    assert whole["isSliced"] and whole["parentReceptacles"] is None and not whole["visible"]
    assert "sliced" in env.step(Action("PickupObject", (APPLE,))).message


def test_reach_is_where_the_agent_stands():
    env = HouseholdEnv(tiny_kitchen())
    run(env, ("GotoLocation", "loc|0|20|0|30"))  # five metres away
    assert not env.step(Action("PickupObject", (APPLE,))).valid
    run(env, ("GotoLocation", "loc|0|-2|0|30"))  # half a metre in front, facing it
    assert env.step(Action("PickupObject", (APPLE,))).valid
    text = env.observation().text
    assert "You hold Apple" in text and "Within reach" in text and "Last action PickupObject" in text


def test_agents_have_their_own_hands():
    env = HouseholdEnv(tiny_kitchen(agents=2))
    run(env, ("GotoObject", APPLE), ("PickupObject", APPLE))
    assert env.step(Action("GotoObject", (MUG,), agent=1)).valid
    assert "carried by agent 0" in env.step(Action("PickupObject", (APPLE,), agent=1)).message
    assert env.step(Action("PickupObject", (MUG,), agent=1)).valid


def test_deterministic():
    def trace() -> list:
        env = HouseholdEnv(tiny_kitchen())
        run(env, ("GotoObject", KNIFE), ("PickupObject", KNIFE), ("SliceObject", BREAD))
        return env.objects()

    assert trace() == trace()
