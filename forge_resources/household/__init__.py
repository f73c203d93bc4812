"""Household environments for the IE track: AI2-THOR's high-level actions on AI2-THOR-schema
object metadata (no engine), the same protocol over a live AI2-THOR controller, goals with
verifiers compiled as data, and a reference planner.

    protocol   Environment, Action, ActionSpec, Observation, StepResult
    catalog    object-type properties and ALFRED's receptacle table
    scene      Scene (initial records, named poses, rules) and containment repair
    world      the mutable state, containment and reach
    actions    action specs, preconditions, effects
    backend    HouseholdEnv
    goals      Goal, Subtask, Verifier, compile_*, evaluate
    planner    plan (weighted A*)
    data       where ../shared/data is, THOR dumps as scenes
    alfred     ALFRED trials: scene, goal, expert-plan expansion
    sllm       tasks_goal_states.json tasks: scene, goal, solution grounding
    thor       ThorEnv and the THOR metadata conversions
"""

from .backend import HouseholdEnv
from .goals import Goal, Predicate, Select, Subtask, Test, Verifier, compile_goal, compile_object_states, \
    compile_subtasks, evaluate
from .planner import PlanNotFound, plan
from .protocol import Action, ActionSpec, Environment, Observation, StepResult
from .scene import Rules, Scene

__all__ = ["Action", "ActionSpec", "Environment", "Goal", "HouseholdEnv", "Observation", "PlanNotFound", "Predicate",
           "Rules", "Scene", "Select", "StepResult", "Subtask", "Test", "Verifier", "compile_goal",
           "compile_object_states", "compile_subtasks", "evaluate", "plan"]
