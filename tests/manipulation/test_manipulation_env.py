"""The manipulation environment behind the IE protocol: a restore is exact (also after an
episode, also after another environment ran), the scripted reference of each task kind reaches
its physical goal from the seeded state and repeats identically, its cut and wrong-target
controls do not, and bad actions are refused with a reason without changing the state."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

pytest.importorskip("robosuite", reason="the robosuite extra is not installed (pip install -e '.[robosuite]')")

from forge_resources.household.protocol import Action, Environment  # noqa: E402
from forge_resources.robosuite.manipulation import ManipulationEnv  # noqa: E402
from forge_resources.robosuite.outcomes import holds  # noqa: E402
from forge_resources.robosuite.scenes import SceneError  # noqa: E402
from forge_resources.robosuite.task_kinds import (Subgoal, cut_control, goal_of, reference_plan,  # noqa: E402
                                                  things, wrong_target_control)

pytestmark = pytest.mark.xdist_group("robosuite")

def _case(env_name: str, seed: int, spec: list[tuple], slow: bool = False):
    return pytest.param(env_name, seed, spec, id=f"{env_name}-{len(spec)}", marks=[pytest.mark.slow] if slow else [])


# (environment, seed, subgoals): seeds whose scripted reference is known to succeed; two subgoals
# in a row are the longest runs (over 10 s each), behind the slow marker.
CASES = [_case("Lift", 1, [("lifted", "cube", None)]),
         _case("Stack", 4, [("stacked", "red cube", "green cube")]),
         _case("PickPlace", 1, [("in_bin", "can", "bin on the right")]),
         _case("NutAssembly", 0, [("on_peg", "square nut", "square peg")]),
         _case("PickPlace", 1, [("in_bin", "can", "bin on the right"), ("in_bin", "milk carton", "bin on the right")],
               slow=True),
         _case("NutAssembly", 1, [("on_peg", "round nut", "round peg"), ("on_peg", "square nut", "square peg")],
               slow=True)]


@pytest.fixture(scope="module")
def env():
    return ManipulationEnv()


def subgoals(env_name: str, spec: list[tuple]) -> list[Subgoal]:
    th = things(env_name)
    return [Subgoal(kind, th[obj], th[place] if place else None) for kind, obj, place in spec]


def run(env: ManipulationEnv, plan: list[Action]) -> list[bool]:
    return [env.step(a).valid for a in plan]


def test_meets_the_environment_protocol(env):
    assert isinstance(env, Environment)
    env.reset({"env": "Lift", "seed": 1})
    names = {a.name for a in env.action_space()}
    assert names == {"MoveDelta", "MoveAbove", "Descend", "Grasp", "Lift", "PlaceAt", "Release"}
    obs = env.observation()
    assert "The cube (object) is at" in obs.text and obs.holding is None
    # Descend needs the gripper above the object first: refused, nothing moved
    before = env.get_state()
    result = env.step(Action("Descend", ("cube",)))
    assert not result.valid and "not above the cube" in result.message
    assert env.get_state() == before
    assert not env.step(Action("PlaceAt", ("cube",))).valid
    assert "no 'mug' here" in env.step(Action("MoveAbove", ("mug",))).message
    assert not env.step(Action("MoveDelta", ("2", "0", "0", "0", "0", "0", "1"))).valid
    moved = env.step(Action("MoveDelta", ("0", "0", "1", "0", "0", "0", "-1")))
    assert moved.valid and env.control_steps() == 1 and env.get_state() != before


@pytest.mark.parametrize("env_name,seed,spec", CASES)
def test_reference_reaches_the_goal_and_controls_do_not(env, env_name, seed, spec):
    env.reset({"env": env_name, "seed": seed})
    state = json.loads(json.dumps(env.get_state()))  # as stored: through JSON
    goals = subgoals(env_name, spec)
    goal = goal_of(goals)
    assert not holds(goal, env), "the goal holds before anything ran"
    plan = reference_plan(goals)
    finals = []
    for _ in range(2):
        env.set_state(state)
        assert env.get_state() == state
        assert all(run(env, plan)), "a reference step was refused"
        assert holds(goal, env)
        finals.append(env.get_state()["mujoco_state"])
    assert finals[0] == finals[1], "two executions from one restored state differ"
    env.set_state(state)
    run(env, cut_control(plan))
    assert not holds(goal, env), "the reference cut before its last phase reaches the goal"
    wrong = wrong_target_control(goals, env_name)
    assert wrong is not None or env_name == "Lift", "no wrong-target control where the scene offers one"
    if wrong is not None:
        env.set_state(state)
        run(env, wrong)
        assert not holds(goal, env), "the wrong-target control reaches the goal"


def test_restore_is_exact_across_environments(env):
    env.reset({"env": "Stack", "seed": 2})
    state = env.get_state()
    env.reset({"env": "NutAssembly", "seed": 0})
    run(env, [Action("MoveAbove", ("round nut",))])
    env.set_state(state)
    assert env.env_name == "Stack" and env.get_state() == state


def test_bad_states_are_named(env):
    with pytest.raises(SceneError, match="environment 'Kitchen'"):
        env.set_state({"env": "Kitchen", "mujoco_state": [], "gripper_command": [0, 0, -1]})
    with pytest.raises(SceneError, match="holds 3 values"):
        env.set_state({"env": "Lift", "mujoco_state": [0.0, 1.0, 2.0], "gripper_command": [0, 0, -1]})
    with pytest.raises(SceneError, match="no manipulation tasks"):
        env.reset({"env": "Wipe", "seed": 0})


def test_a_restore_continues_the_same_whatever_ran_before(env):
    """The controllers cache the arm's state: a restore after another episode must not run on
    what they cached there."""
    env.reset({"env": "Stack", "seed": 4})
    state = env.get_state()
    plan = reference_plan(subgoals("Stack", [("stacked", "red cube", "green cube")]))
    run(env, plan)
    first = env.get_state()["mujoco_state"]
    env.reset({"env": "Stack", "seed": 7})
    run(env, reference_plan(subgoals("Stack", [("stacked", "green cube", "red cube")]))[:3])
    env.set_state(state)
    run(env, plan)
    # the same to a micrometre (controllers keep float caches of their last update)
    assert np.allclose(env.get_state()["mujoco_state"], first, rtol=0, atol=1e-6)
