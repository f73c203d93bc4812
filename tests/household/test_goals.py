"""Goals compile to verifiers as data; evaluation reads AI2-THOR metadata only."""

from __future__ import annotations

import json

import pytest

from forge_resources.household import (Action, Goal, HouseholdEnv, Subtask, Verifier, compile_goal,
                                       compile_object_states, compile_subtasks, evaluate)
from forge_resources.household.data import load_dump
from forge_resources.household.goals import TASK_TYPES, Select
from forge_resources.household.scene import Rules

from .conftest import DATA, needs_data, tiny_kitchen
from .test_alfred import alfred_oracle
from .test_backend import APPLE, BASIN, COUNTER, FAUCET, FRIDGE, KNIFE, MUG, OVEN, run


def test_every_alfred_task_type_compiles_to_predicate_records():
    expected = {"pick_and_place_simple": ["in_place"], "pick_two_obj_and_place": ["in_place"],
                "look_at_obj_in_light": ["holding", "light_on"],
                "pick_clean_then_place_in_recep": ["in_place", "cleaned", "cleaned_in_place"],
                "pick_heat_then_place_in_recep": ["in_place", "heated", "heated_in_place"],
                "pick_cool_then_place_in_recep": ["in_place", "cooled", "cooled_in_place"],
                "pick_and_place_with_movable_recep": ["object_in_mrecep", "mrecep_in_place", "stack_in_place"]}
    for kind in TASK_TYPES:
        for sliced in (False, True):
            verifier = compile_goal(Goal(kind, "Apple", "CounterTop", "DeskLamp", "Bowl", sliced))
            assert [p.id for p in verifier.predicates] == (["sliced"] if sliced else []) + expected[kind]
            assert Verifier.from_dict(json.loads(json.dumps(verifier.to_dict()))) == verifier
    with pytest.raises(ValueError, match="unknown ALFRED task type"):
        compile_goal(Goal("make_tea", "Mug"))


def test_sliced_goals_agree_with_alfred_through_a_scripted_episode():
    goals = [Goal(kind, "Apple", "Fridge", "", "Mug", sliced) for kind in TASK_TYPES for sliced in (False, True)
             if kind != "look_at_obj_in_light"]
    goals.append(Goal("pick_and_place_with_movable_recep", "Knife", "CounterTop", "", "Mug"))
    env = HouseholdEnv(tiny_kitchen(Rules("any", "invalid")))
    one, two = f"{APPLE}|AppleSliced_0", f"{APPLE}|AppleSliced_1"
    script = [("GotoObject", KNIFE), ("PickupObject", KNIFE), ("SliceObject", APPLE), ("PutObject", KNIFE, MUG),
              ("PickupObject", one), ("GotoObject", BASIN), ("PutObject", one, BASIN), ("ToggleObjectOn", FAUCET),
              ("PickupObject", one), ("GotoObject", OVEN), ("OpenObject", OVEN), ("PutObject", one, OVEN),
              ("ToggleObjectOn", OVEN), ("PickupObject", one), ("GotoObject", FRIDGE), ("OpenObject", FRIDGE),
              ("PutObject", one, FRIDGE), ("CloseObject", FRIDGE), ("OpenObject", FRIDGE), ("GotoObject", COUNTER),
              ("PickupObject", two), ("GotoObject", FRIDGE), ("PutObject", two, FRIDGE)]
    seen = set()
    for step in [None, *script]:
        if step:
            run(env, step)
        objects = env.objects()
        for goal in goals:
            trial = {"task_type": goal.task_type, "pddl_params": {
                "object_target": goal.object_target, "parent_target": goal.parent_target, "toggle_target": "",
                "mrecep_target": goal.mrecep_target, "object_sliced": goal.object_sliced}}
            s, ts = alfred_oracle(trial, objects)
            ok, progress, _ = evaluate(compile_goal(goal), objects)
            assert (ok, progress) == (s == ts, pytest.approx(s / ts)), (goal, step)
            seen.add((goal.task_type, goal.object_sliced, ok))
    assert ("pick_two_obj_and_place", True, True) in seen and ("pick_cool_then_place_in_recep", True, True) in seen


def test_alfred_matches_targets_inside_object_ids_as_alfred_does():
    pot = {"objectId": "Potato|+00.00|+00.90|+00.00", "objectType": "Potato", "pickupable": True}
    assert Select("Pot", "id_contains", ("pickupable",))(pot)  # ALFRED's own quirk, kept for agreement
    assert not Select("Pot")(pot)
    piece = {"objectId": "Apple|+00.10|+00.95|+00.00|AppleSliced_0", "objectType": "AppleSliced"}
    assert Select("Apple", "base_type")(piece) and not Select("Apple")(piece)


def test_subtasks_with_all_and_any_completion():
    env = HouseholdEnv(tiny_kitchen())
    subtasks = [Subtask("Apple", {"isSliced": True}), Subtask("Mug", {"isDirty": True}, "SinkBasin")]
    every, some = compile_subtasks(subtasks, "all"), compile_subtasks(subtasks, "any")
    assert evaluate(every, env.objects())[:2] == (False, 0.0)
    run(env, ("GotoObject", KNIFE), ("PickupObject", KNIFE), ("SliceObject", APPLE))
    ok, progress, unmet = evaluate(every, env.objects())
    assert not ok and progress == 0.5 and unmet[0].startswith("subtask_1")
    assert evaluate(some, env.objects())[:2] == (True, 1.0)
    pieces_on_counter = compile_subtasks([Subtask("Apple", {}, "CounterTop")])  # a slice counts as its whole
    assert evaluate(pieces_on_counter, env.objects())[0]
    heat = Goal("pick_heat_then_place_in_recep", "Mug", "CounterTop").subtasks()
    assert heat == (Subtask("Mug", {"heated": True}, "CounterTop"),)


@needs_data
def test_evaluation_reads_bare_thor_metadata():
    objects = json.loads((DATA / "ai2thor" / "FloorPlan9_objects.json").read_text())
    assert "isCooled" not in objects[0]
    cold_apple = compile_subtasks([Subtask("Apple", {"cooled": True}, "Fridge")])
    assert evaluate(cold_apple, objects) == (True, 1.0, [])  # no ALFRED flags: temperature decides
    hot_mug = compile_subtasks([Subtask("Mug", {"heated": True}, "CoffeeMachine")])
    assert not evaluate(hot_mug, objects)[0]


@needs_data
def test_object_states_compile_from_the_tasks_file():
    tasks = json.loads((DATA / "ai2thor" / "tasks_goal_states.json").read_text())
    for task in tasks:
        verifier = compile_object_states(task["object_states"])
        assert len(verifier.predicates) == len(task["object_states"]) and verifier.mode == "all"
    drawer = compile_object_states([{"objectType": "Drawer", "receptacleObjectTypes": ["Knife", "Spoon", "Fork"],
                                     "state": {"isOpen": False}}]).predicates[0]
    assert [s.value for s in drawer.contains] == ["Knife", "Spoon", "Fork"] and drawer.tests[0].field == "isOpen"
    env = HouseholdEnv(load_dump(6, DATA))
    assert not evaluate(compile_object_states(tasks[0]["object_states"]), env.objects())[0]


def test_unmet_conditions_are_named():
    env = HouseholdEnv(tiny_kitchen())
    verifier = compile_goal(Goal("pick_cool_then_place_in_recep", "Apple", "CounterTop"))
    ok, progress, unmet = evaluate(verifier, env.objects())
    assert not ok and progress == pytest.approx(1 / 3)
    assert [u.split(":")[0] for u in unmet] == ["cooled", "cooled_in_place"]
    assert env.step(Action("GotoObject", (APPLE,))).valid
