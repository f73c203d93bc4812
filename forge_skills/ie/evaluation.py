"""``forge eval PACKAGE --agent SPEC`` for IE packages: run every task's episode with the agent,
ask its trajectory EQA, store the records, and report SR, EQA accuracy, SRL and Avg. Steps.

An IE package (``manifest.json`` with ``"track": "ie"``) is laid out as::

    manifest.json            {"track": "ie", "name", "version", ..., "tasks": [task ids]} (the list is
                             optional: default, every tasks/*.json in name order)
    tasks/<task_id>.json     a TaskSpec's visible fields (TaskSpec.VISIBLE: task_id, scene, scene_type,
                             split, instruction, action_interface, max_steps)
    answers/<task_id>.json   the hidden rest: task_type, goal, verifier, reference_plan, subtasks,
                             budget_steps (a task file holding every TaskSpec field needs none)
    states/<task_id>.json    the initial state: exactly what HouseholdEnv.get_state() returns
                             ({"format": 1, "scene": ..., "world": ..., ...}); HouseholdEnv().set_state
                             restores it
    <module>/score.py        optional: the OE scorer; EQA answers are scored with it when present,
                             else with the same scorer from forge

Per (package digest, agent key, task) the store's ``eval_episodes`` table keeps one row: the
outcome columns, the evaluation record (actions, validity, steps, success, progress, EQA questions,
answers and correctness) and the full episode (states included) as JSON. A run that stops is
resumed by running it again: stored episodes are not run again, and a model agent's requests
already answered come from the response cache. The report (``PACKAGE/.eval/<agent-slug>.json``,
or ``DIR/reports/<package>/<agent-slug>.json`` with ``--store DIR``) holds the metrics overall,
per split and per scene type, and every episode's record, from which they can be recomputed.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Sequence

import pyarrow as pa
from pydantic import ValidationError

from forge.errors import UsageError
from forge.evaluation.session import EvalOptions, evaluation_session, write_report
from forge.store import Store, now

TABLE = "eval_episodes"
COLUMNS = ("package", "package_digest", "agent", "agent_key", "simulated", "task_id", "split", "scene_type",
           "success", "progress", "steps", "invalid", "ended", "questions", "correct", "record", "episode",
           "seconds", "run_id", "evaluated_at")
_DDL = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    package VARCHAR, package_digest VARCHAR, agent VARCHAR, agent_key VARCHAR, simulated BOOLEAN,
    task_id VARCHAR, split VARCHAR, scene_type VARCHAR, success BOOLEAN, progress DOUBLE, steps INTEGER,
    invalid INTEGER, ended VARCHAR, questions INTEGER, correct INTEGER, record VARCHAR, episode VARCHAR,
    seconds DOUBLE, run_id VARCHAR, evaluated_at TIMESTAMP);
"""


# -- the package ---------------------------------------------------------------------------


@dataclass
class IEPackage:
    path: Path
    manifest: dict[str, Any]
    digest: str  # SHA-256 of manifest.json
    task_ids: list[str]
    scorer: ModuleType | None = None

    @property
    def name(self) -> str:
        return str(self.manifest.get("name", self.path.name))

    @property
    def version(self) -> str:
        return str(self.manifest.get("version", "?"))

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}"

    def _json(self, rel: str) -> Any:
        path = self.path / rel
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UsageError(f"{path}: missing from the IE package") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise UsageError(f"{path}: not JSON ({exc})") from None

    def task(self, task_id: str) -> Any:
        """The TaskSpec: its visible fields, with the hidden ones from ``answers/`` where the task
        file lacks them."""
        from forge_skills.ie.spec import TaskSpec

        data = self._json(f"tasks/{task_id}.json")
        hidden = self.path / "answers" / f"{task_id}.json"
        if hidden.is_file():
            data = {**self._json(f"answers/{task_id}.json"), **data}
        data = {k: v for k, v in data.items() if k in TaskSpec.model_fields}
        try:
            return TaskSpec.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:4])
            raise UsageError(f"{self.path / 'tasks' / (task_id + '.json')}: not a task ({problems})") from None

    def state(self, task_id: str) -> dict[str, Any]:
        return self._json(f"states/{task_id}.json")


def _manifest(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def is_ie_package(package: Any) -> bool:
    """An :class:`IEPackage`, or a folder whose manifest says track ``ie``."""
    if isinstance(package, IEPackage):
        return True
    if not isinstance(package, (str, Path)):
        return False
    manifest = _manifest(Path(package))
    return manifest is not None and str(manifest.get("track", "")).lower() == "ie"


def load_ie_package(path: str | Path) -> IEPackage:
    folder = Path(path)
    if not (folder / "manifest.json").is_file():
        raise UsageError(f"{folder}: not a package (no manifest.json)")
    raw = (folder / "manifest.json").read_bytes()
    manifest = _manifest(folder)
    if manifest is None:
        raise UsageError(f"{folder / 'manifest.json'}: the manifest cannot be read")
    listed = manifest.get("tasks")
    if isinstance(listed, list) and all(isinstance(t, str) for t in listed):
        ids = list(listed)
    else:
        ids = sorted(p.stem for p in (folder / "tasks").glob("*.json"))
    if not ids:
        raise UsageError(f"{folder}: an IE package with no tasks (tasks/<task_id>.json)")
    lacking = [t for t in ids if not (folder / "states" / f"{t}.json").is_file()]
    if lacking:
        raise UsageError(f"{folder / 'states'}: {len(lacking)} task(s) have no initial state, e.g. {lacking[0]}.json")
    scorer = None
    if any(folder.glob("*/score.py")):
        from forge.evaluation.package import load_scorer

        scorer = load_scorer(folder, manifest, hashlib.sha256(raw).hexdigest())
    return IEPackage(folder, manifest, hashlib.sha256(raw).hexdigest(), ids, scorer)


# -- the store -----------------------------------------------------------------------------


def ensure_table(store: Store) -> None:
    if not store.read_only:
        store.execute(_DDL)


def stored(store: Store, package_digest: str, agent_key: str) -> dict[str, dict[str, Any]]:
    """Task id -> the stored evaluation record, for this package and agent."""
    if store.one(f"SELECT count(*) FROM information_schema.tables WHERE table_name = '{TABLE}'")[0] == 0:
        return {}
    rows = store.execute(f"SELECT task_id, record FROM {TABLE} WHERE package_digest = ? AND agent_key = ? "
                         "ORDER BY evaluated_at", [package_digest, agent_key]).fetchall()
    return {tid: json.loads(record) for tid, record in rows}


def stored_episode(store: Store, package_digest: str, agent_key: str, task_id: str) -> Any:
    """The full stored Episode of one task, or None."""
    from forge_skills.ie.episodes import Episode

    row = store.one(f"SELECT episode FROM {TABLE} WHERE package_digest = ? AND agent_key = ? AND task_id = ?",
                    [package_digest, agent_key, task_id])
    return Episode.from_json(row[0]) if row else None


def write(store: Store, rows: Sequence[tuple]) -> None:
    """Insert rows (one per episode), replacing any stored for the same package, agent and task."""
    if not rows:
        return
    table = pa.table({c: [r[i] for r in rows] for i, c in enumerate(COLUMNS)})
    store.con.register("_episode_rows", table)
    store.execute("BEGIN TRANSACTION")
    try:
        store.execute(f"DELETE FROM {TABLE} WHERE EXISTS (SELECT 1 FROM _episode_rows r WHERE r.package_digest = "
                      f"{TABLE}.package_digest AND r.agent_key = {TABLE}.agent_key AND r.task_id = {TABLE}.task_id)")
        store.execute(f"INSERT INTO {TABLE} ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} FROM _episode_rows")
        store.execute("COMMIT")
    except Exception:
        store.execute("ROLLBACK")
        raise
    finally:
        store.con.unregister("_episode_rows")


# -- one episode ---------------------------------------------------------------------------


def evaluate_task(task: Any, state: dict[str, Any], spec: Any, *, client: Any = None,
                  scorer: ModuleType | None = None, max_steps: int | None = None) -> tuple[dict[str, Any], Any]:
    """Run one task's episode and its trajectory EQA: (the evaluation record, the Episode)."""
    from forge_skills.ie.trajectory_answers import score, visible
    from forge_skills.ie.world import default_environment, world

    agent = spec.create(task, client)
    runs = world(getattr(task, "environment", default_environment()))
    vision = bool(getattr(getattr(spec, "role", None), "vision", False))
    episode = runs.run_episode(task, state, agent, max_steps=max_steps, image=vision)
    questions = runs.questions(task, episode)
    agent.last_reply = None
    responses = list(agent.answer([visible(q) for q in questions], episode))
    responses += [""] * (len(questions) - len(responses))
    eqa = []
    for q, reply in zip(questions, responses):
        valid, correct, reading = score(q, reply, scorer)
        eqa.append({"id": q["id"], "kind": q["kind"], "state": q["state"], "question_type": q["question_type"],
                    "question": q["question"], "options": q["options"], "key": q["answer"], "response": reply,
                    "reading": reading, "valid": valid, "correct": correct})
    record = {
        "task_id": task.task_id, "split": task.split, "scene_type": task.scene_type, "scene": task.scene,
        "agent": spec.spec, "success": episode.success, "progress": episode.progress, "unmet": episode.unmet,
        "steps": episode.n_steps, "invalid": episode.invalid, "ended": episode.ended,
        "actions": [{"index": s.index, "action": s.text, "valid": s.valid, "message": s.message}
                    for s in episode.steps],
        "eqa": eqa, "eqa_reply": getattr(agent, "last_reply", None),
    }
    return record, episode


# -- the run -------------------------------------------------------------------------------


def _agent_spec(agent: Any) -> Any:
    from forge_skills.ie.agents import AgentSpec, parse_agent

    if isinstance(agent, AgentSpec):
        return agent
    role = getattr(agent, "role", None)
    if role is not None:  # a ModelSpec from --model
        return AgentSpec(f"{role.base_url}@{role.model}", "model", role=role)
    if getattr(agent, "solver", None) is not None:
        raise UsageError(f"{agent.spec}: built-in OE solvers answer questions; an IE package needs an agent "
                         "(--agent reference, random[:SEED], greedy, BASE_URL@MODEL or @FILE.yaml)")
    return parse_agent(str(agent))


def evaluate_agent(package: str | Path | IEPackage, agent: Any, options: EvalOptions | None = None, *,
                   store: Store | None = None, client: Any = None) -> dict[str, Any]:
    """Run ``agent`` on every task of an IE package (resumable) and return its report (also written)."""
    options = options or EvalOptions()
    pkg = package if isinstance(package, IEPackage) else load_ie_package(package)
    spec = _agent_spec(agent)
    with evaluation_session(pkg.path, options, store, client) as run:
        store, run_id = run.store, run.run_id
        ensure_table(store)
        ids = pkg.task_ids[: options.limit] if options.limit is not None else pkg.task_ids
        before = stored(store, pkg.digest, spec.key)
        todo = [t for t in ids if t not in before]
        client = run.model_client() if spec.kind == "model" and todo else run.client
        done = len(ids) - len(todo)
        for tid in todo:
            start = time.perf_counter()
            record, episode = evaluate_task(pkg.task(tid), pkg.state(tid), spec, client=client, scorer=pkg.scorer)
            seconds = time.perf_counter() - start
            write(store, [(pkg.label, pkg.digest, spec.spec, spec.key, spec.simulated, tid, record["split"],
                           record["scene_type"], record["success"], float(record["progress"]), record["steps"],
                           record["invalid"], record["ended"], len(record["eqa"]),
                           sum(q["correct"] for q in record["eqa"]), json.dumps(record, sort_keys=True),
                           episode.to_json(), seconds, run_id, now())])
            done += 1
            if options.progress:
                options.progress(spec.spec, done, len(ids))
        records = stored(store, pkg.digest, spec.key)
        report = summarize(pkg, spec, [records[t] for t in ids], run_id=run_id, reused=len(ids) - len(todo))
    return write_report(report, pkg, spec, options)


def summarize(pkg: IEPackage, spec: Any, records: Sequence[dict[str, Any]], *, run_id: str | None = None,
              reused: int = 0) -> dict[str, Any]:
    from forge_skills.ie.metrics import EpisodeOutcome
    from forge_skills.ie.metrics import summarize as metrics

    result = metrics([EpisodeOutcome.from_record(r) for r in records]).to_dict()
    return {
        "track": "ie",
        "package": {"name": pkg.name, "version": pkg.version, "path": str(pkg.path), "digest": pkg.digest},
        "agent": spec.spec, "agent_key": spec.key, "simulated": spec.simulated,
        "label": spec.kind if spec.simulated else "model",
        "metrics": result,
        "episodes": list(records),
        "run": {"run_id": run_id, "run_now": len(records) - reused, "from_store": reused},
    }


def render(report: dict[str, Any]) -> str:
    """The report as text for a terminal."""
    pkg, m = report["package"], report["metrics"]

    def num(x: Any, fmt: str = ".4f") -> str:
        return "-" if x is None else format(x, fmt)

    o = m["overall"]
    tag = f"  [{report['label']}]" if report["simulated"] else ""
    lines = [f"{pkg['name']} {pkg['version']}: {report['agent']}{tag}",
             f"  SR {num(o['SR'])}  EQA accuracy {num(o['EQA_accuracy'])}  SRL {num(o['SRL'])}  "
             f"Avg. Steps {num(o['avg_steps'], '.2f')} over {o['episodes']} episodes, {o['questions']} questions; "
             f"invalid actions {o['invalid_actions']}, timeouts {o['timeouts']}; {report['run']['run_now']} run now, "
             f"{report['run']['from_store']} from the store"]
    for title, key in (("split", "by_split"), ("scene type", "by_scene_type")):
        lines.append(f"  {title:<14} {'episodes':>8} {'SR':>7} {'EQA':>7} {'SRL':>7} {'steps':>7} {'invalid':>8}")
        for name, g in m[key].items():
            lines.append(f"    {name:<12} {g['episodes']:>8} {num(g['SR']):>7} {num(g['EQA_accuracy']):>7} "
                         f"{num(g['SRL']):>7} {num(g['avg_steps'], '.1f'):>7} {g['invalid_actions']:>8}")
    lines.append(f"  report: {report.get('report_path', '-')}")
    return "\n".join(lines)


# What the engine's `forge eval` asks of a track that evaluates its packages by episodes
# (registered as ``package_evaluator:ie``).
is_package = is_ie_package
load = load_ie_package
evaluate = evaluate_agent


def parse_agent(spec: str):
    from forge_skills.ie.agents import parse_agent as parse

    return parse(spec)
