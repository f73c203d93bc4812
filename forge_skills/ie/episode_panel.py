"""Gate E for packages of interactive tasks, as the IE track runs it: the built-in agents run
every task's episode and answer its trajectory questions (registered as
``episode_panel:builtin``; see ``forge_skills.package.episode_panel``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def episode_responses(folder: Path, agents: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                     list[dict[str, Any]]]:
    """(members, one response record per agent and task, the agents' evaluation records)."""
    from forge.evaluation.run import EvalOptions
    from forge.store import Store
    from forge_skills.ie.agents import parse_agent
    from forge_skills.ie.evaluation import evaluate_agent, load_ie_package

    pkg = load_ie_package(folder)
    members, rows, records = [], [], []
    with Store(folder / ".gate-e", wait_s=10.0) as store:
        for text in agents:
            spec = parse_agent(text)
            if not spec.simulated:
                raise ValueError(f"{text}: gate E's built-in agents are reference, random[:SEED] and greedy")
            report = evaluate_agent(pkg, spec, EvalOptions(store_dir=folder / ".gate-e"), store=store)
            members.append({"model": spec.spec, "simulated": True,
                            "label": f"simulated: the {spec.kind} agent (no model)"})
            for r in report["episodes"]:
                rows.append({"model": spec.spec, "model_reported": f"builtin:{spec.spec}", "simulated": True,
                             "item_id": r["task_id"], "response": r["ended"],
                             "answer": "success" if r["success"] else "failure", "valid": True,
                             "score": 1.0 if r["success"] else 0.0})
                records.append({k: v for k, v in r.items() if k != "eqa_reply"})
    return members, rows, records


def episode_metrics(records: list[dict[str, Any]], members: list[dict[str, Any]]) -> dict[str, Any]:
    """SR, EQA accuracy, SRL and Avg. Steps per agent (the paper's A.3.1), from the records."""
    from forge_skills.ie.metrics import EpisodeOutcome, summarize

    out = []
    for m in members:
        mine = [EpisodeOutcome.from_record(r) for r in records if r["agent"] == m["model"]]
        o = summarize(mine).to_dict()["overall"]
        out.append({"agent": m["model"], "simulated": m["simulated"], "episodes": o["episodes"], "sr": o["SR"],
                    "eqa": o["EQA_accuracy"], "srl": o["SRL"], "steps": o["avg_steps"],
                    "questions": o["questions"]})
    return {"agents": out}
