"""Gate E for packages of interactive tasks: agents run every task's episode and answer its
trajectory questions; a task is an item of the response matrix (1 when the agent's episode
reaches the goal), and the episode records ship beside it.

The built-in agents are simulated (the reference plan, a seeded random valid action, a greedy
heuristic), labelled so wherever they appear; a task's trajectory questions are asked about the
agent's own episode, so they enter the EQA metrics, not the shared matrix. The track that runs
the episodes registers the panel (``episode_panel:builtin``); the assessment only asks for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

DEFAULT_AGENTS = ("reference", "random:1", "greedy")
EPISODES_FILE = "evaluation/episodes.jsonl"


def is_task_package(folder: Path) -> bool:
    return (folder / "tasks.jsonl").is_file() and not (folder / "items.jsonl").is_file()


def episode_responses(folder: Path, agents: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                     list[dict[str, Any]]]:
    """(members, one response record per agent and task, the agents' evaluation records), from
    the registered episode panel (the IE track's)."""
    return _panel().episode_responses(folder, agents)


def episode_metrics(records: list[dict[str, Any]], members: list[dict[str, Any]]) -> dict[str, Any]:
    """SR, EQA accuracy, SRL and Avg. Steps per agent, from the records."""
    return _panel().episode_metrics(records, members)


def _panel() -> Any:
    from forge.registry import lookup

    return lookup("episode_panel", "builtin")
