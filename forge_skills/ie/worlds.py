"""The built-in interactive worlds: the household (AI2-THOR floor plans with ALFRED's rules, run
by forge's household backend), robosuite manipulation (MuJoCo scenes run by forge's
``ManipulationEnv``) and LIBERO's tasks (LIBERO's own environments run by forge's
``LiberoTaskEnv``), each registered as ``ie_world:<name>``."""

from __future__ import annotations

from typing import Any

from forge.registry import register
from forge_skills.ie.checks import HOUSEHOLD_CHECKS
from forge_skills.ie.episodes import run_episode
from forge_skills.ie.manipulation import ENVIRONMENT as MANIPULATION, PACKAGE as MANIPULATION_PACKAGE, reverify_task
from forge_skills.ie.manipulation_checks import ROBOSUITE_CHECKS
from forge_skills.ie.manipulation_episodes import answer_from_log as manipulation_answers
from forge_skills.ie.manipulation_episodes import questions_for as manipulation_questions
from forge_skills.ie.manipulation_episodes import run_manipulation_episode
from forge_skills.ie.package import HOUSEHOLD as HOUSEHOLD_PACKAGE
from forge_skills.ie.reverify import household_task_problem
from forge_skills.ie.trajectory_answers import household_answer_from_log
from forge_skills.ie.trajectory_eqa import questions_for
from forge_skills.ie.types import IETask
from forge_skills.ie.world import IEWorld
from forge_skills.ie import libero
from forge_skills.ie.libero_checks import LIBERO_CHECKS


def _household_episode(task: Any, state: dict[str, Any], agent: Any, *, max_steps: int | None = None,
                       image: bool = False) -> Any:
    """A household episode (its observations are text: ``image`` has nothing to add)."""
    return run_episode(task, state, agent, max_steps=max_steps)


HOUSEHOLD = IEWorld(name=IETask.model_fields["environment"].default, checks=HOUSEHOLD_CHECKS,
                    reverify=household_task_problem, run_episode=_household_episode, questions=questions_for,
                    answer_from_log=household_answer_from_log, package=HOUSEHOLD_PACKAGE)
MANIPULATION_WORLD = IEWorld(name=MANIPULATION, checks=ROBOSUITE_CHECKS, reverify=reverify_task,
                             run_episode=run_manipulation_episode, questions=manipulation_questions,
                             answer_from_log=manipulation_answers, package=MANIPULATION_PACKAGE,
                             shows=("budget",))
LIBERO_WORLD = IEWorld(name=libero.ENVIRONMENT, checks=LIBERO_CHECKS, reverify=libero.reverify_task,
                       run_episode=libero.run_libero_episode, questions=manipulation_questions,
                       answer_from_log=manipulation_answers, package=libero.PACKAGE, shows=("budget",))
for _world in (HOUSEHOLD, MANIPULATION_WORLD, LIBERO_WORLD):
    register("ie_world", _world.name, _world)
