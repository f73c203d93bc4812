"""IE metrics over saved episode records, as the paper's A.3.1 defines them.

For N episodes with success s_i in {0, 1}, Q_i EQA questions with correctness c_iq in {0, 1} and
n_i executed steps (invalid ones included; an explicit stop is not a step):

    SR            = (1/N) sum_i s_i
    EQA accuracy  = sum_i sum_q c_iq / sum_i Q_i          (a question-level micro average)
    SRL           = sum_i sum_q s_i c_iq / sum_i Q_i
    Avg. Steps    = (1/N) sum_i n_i                       (every episode: success, failure, timeout)

With no questions at all, EQA accuracy and SRL are None (undefined), as is everything over no
episodes. Besides these: invalid actions (a total, per episode and per step taken), timeouts,
explicit stops and the mean goal progress. Groups: overall, per split and per scene type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

ROUND = 6


@dataclass(frozen=True)
class EpisodeOutcome:
    """What the metrics read of one episode."""

    task_id: str
    split: str
    scene_type: str
    success: bool
    steps: int
    invalid: int = 0
    correct: tuple[bool, ...] = ()  # c_iq, one per question
    ended: str = ""
    progress: float = 0.0

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> EpisodeOutcome:
        """From an evaluation record (``forge_skills.ie.evaluation``): its episode fields and EQA rows."""
        return cls(record["task_id"], record["split"], record["scene_type"], bool(record["success"]),
                   int(record["steps"]), int(record.get("invalid", 0)),
                   tuple(bool(q["correct"]) for q in record.get("eqa", [])), record.get("ended", ""),
                   float(record.get("progress", 0.0)))


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, ROUND)


def compute(outcomes: Sequence[EpisodeOutcome]) -> dict[str, Any]:
    """SR, EQA accuracy, SRL, Avg. Steps and the counts, for one group of episodes."""
    n = len(outcomes)
    questions = sum(len(o.correct) for o in outcomes)
    correct = sum(sum(o.correct) for o in outcomes)
    joint = sum(int(o.success) * sum(o.correct) for o in outcomes)
    steps = sum(o.steps for o in outcomes)
    invalid = sum(o.invalid for o in outcomes)
    return {
        "episodes": n,
        "SR": _r(sum(o.success for o in outcomes) / n) if n else None,
        "EQA_accuracy": _r(correct / questions) if questions else None,
        "SRL": _r(joint / questions) if questions else None,
        "avg_steps": _r(steps / n) if n else None,
        "questions": questions,
        "correct": correct,
        "successes": sum(o.success for o in outcomes),
        "steps": steps,
        "invalid_actions": invalid,
        "invalid_per_episode": _r(invalid / n) if n else None,
        "invalid_rate": _r(invalid / steps) if steps else 0.0,
        "timeouts": sum(o.ended == "timeout" for o in outcomes),
        "stops": sum(o.ended == "stop" for o in outcomes),
        "mean_progress": _r(sum(o.progress for o in outcomes) / n) if n else None,
    }


@dataclass
class Report:
    overall: dict[str, Any]
    by_split: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_scene_type: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"overall": self.overall, "by_split": self.by_split, "by_scene_type": self.by_scene_type}


def _groups(outcomes: Iterable[EpisodeOutcome], attr: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[EpisodeOutcome]] = {}
    for o in outcomes:
        groups.setdefault(getattr(o, attr), []).append(o)
    return {k: compute(v) for k, v in sorted(groups.items())}


def summarize(outcomes: Sequence[EpisodeOutcome]) -> Report:
    """The metrics overall, per split and per scene type."""
    return Report(compute(outcomes), _groups(outcomes, "split"), _groups(outcomes, "scene_type"))
