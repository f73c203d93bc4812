"""tasks_goal_states.json: each solution runs on its floor plan's real THOR dump and reaches its
``object_states``; no strict prefix does, except where the dataset itself makes that impossible."""

from __future__ import annotations

import pytest

from forge_resources.household import HouseholdEnv, evaluate
from forge_resources.household.sllm import ground, load_tasks, parse_step, task_scene, task_verifier

from .conftest import DATA, needs_data

pytestmark = needs_data
TASKS = load_tasks(DATA) if (DATA / "ai2thor").is_dir() else []

# Tasks whose goal some strict prefix of their own solution already meets, with the prefixes
# (counted in steps taken) and why the dataset makes it so.
PREFIX_EXCEPTIONS = {
    "Prepare a dinner setting with a plate of sliced bread, a cup of water, and a knife on the counter":
        ([15, 16, 17, 18], "the bread is sliced where it lies, on the first CounterTop, where the knife and then "
                           "the filled cup are put; the last four steps carry a slice from that counter back onto it"),
    "Set up a breakfast tray with a freshly brewed cup of coffee and a plate of cracked raw egg on the dining "
    "table. Remember to close the cabinet after fetching the cup and close the fridge after taking the egg":
        ([20, 21, 22], "the DiningTable entry asks for no state and no contents, so the goal holds once the broken "
                       "egg is on the plate; carrying the plate to the table is not checked"),
    "Turn on the floor lamp": ([0, 1], "FloorPlan207's FloorLamp is on in the dump: the goal holds before any step"),
    "Place the laptop in the box and then place the box on the coffee table":
        ([4], "the Box already stands on the CoffeeTable, so the goal holds once the laptop is in it; the last "
              "three steps lift the box and set it back"),
    "Clean a dirty cloth and place it back on the shelf":
        ([0, 1, 2], "FloorPlan404's Cloth is clean and already on the shelf: the goal holds before any step"),
}


def run(task: dict) -> tuple[list[str], list[bool], HouseholdEnv]:
    env = HouseholdEnv(task_scene(task, DATA))
    verifier = task_verifier(task)
    failures, reached = [], [evaluate(verifier, env.objects())[0]]
    for i, line in enumerate(task["solution"]):
        action = ground(env.world, task["solution"], i)
        result = env.step(action)
        if not result.valid:
            failures.append(f"step {i} {line} -> {action}: {result.message}")
        reached.append(evaluate(verifier, env.objects())[0])
    return failures, reached, env


@pytest.mark.parametrize("task", TASKS, ids=lambda t: f"{t['floorplan']}-{t['task'][:40]}")
def test_solution_executes_and_meets_the_goal(task):
    failures, reached, env = run(task)
    assert not failures, "\n".join(failures)
    ok, progress, unmet = evaluate(task_verifier(task), env.objects())
    assert ok and progress == 1.0, unmet
    early = [k for k, hit in enumerate(reached[:-1]) if hit]
    expected, why = PREFIX_EXCEPTIONS.get(task["task"], ([], ""))
    assert early == expected, f"prefixes meeting the goal: {early} (documented: {expected} - {why})"


def test_every_task_is_covered():
    assert len(TASKS) == 29 and {t["floorplan"] for t in TASKS} == {6, 9, 207, 306, 404}
    assert set(PREFIX_EXCEPTIONS) <= {t["task"] for t in TASKS}
    executed = sum(not run(t)[0] for t in TASKS)
    strict = sum(t["task"] not in PREFIX_EXCEPTIONS for t in TASKS)
    print(f"\ntasks_goal_states: {executed}/{len(TASKS)} solutions execute and meet their goal; "
          f"{strict}/{len(TASKS)} have no strict prefix that does")
    assert executed == len(TASKS)


def test_steps_parse_and_stove_toggles_go_through_the_knob():
    assert parse_step("PutObject(robots[1], 'Cup', 'CounterTop')") == ("PutObject", 1, ("Cup", "CounterTop"))
    assert parse_step("FillObjectWithLiquid(robots[0], 'Pot', 'water')")[2] == ("Pot", "water")
    with pytest.raises(ValueError):
        parse_step("Teleport(robots[0])")
    task = next(t for t in TASKS if "cooking station" in t["task"])
    env = HouseholdEnv(task_scene(task, DATA))
    i = task["solution"].index("ToggleOnObject(robots[0], 'StoveBurner')")
    for k in range(i):
        env.step(ground(env.world, task["solution"], k))
    action = ground(env.world, task["solution"], i)
    assert action.args[0].startswith("StoveKnob")
