"""The episode harness on real tasks: the reference agent succeeds everywhere, the random one almost
nowhere; invalid actions are recorded and not fatal; the step cap is a timeout; episodes serialize;
the metrics are the paper's A.3.1 formulas; a loopback chat model drives episodes; ``forge eval
--agent`` runs an IE package, stores its records and resumes."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from forge.cli import main
from forge.evaluation import EvalOptions, evaluate
from forge_skills.ie.evaluation import load_ie_package, stored, stored_episode
from forge.models import ModelClient, ModelRole
from forge.models.loopback import LoopbackServer
from forge.store import Store
from forge_resources.household import HouseholdEnv, Verifier, evaluate as verify
from forge_resources.household.protocol import Action
from forge_skills.ie.agents import EQA_SYSTEM, parse_agent
from forge_skills.ie.episodes import STOP, Episode, Unreadable, run_episode, states, view
from forge_skills.ie.metrics import EpisodeOutcome, compute, summarize
from forge_skills.ie.spec import MAX_STEPS
from forge_skills.ie.trajectory_eqa import questions_for
from forge_skills.ie.trajectory_answers import answer_from_log, score, visible

from .conftest import write_package

# Tests that use the ``tasks`` fixture skip, with the reason, where the real data is absent.


def run_with(spec_text, task, state, **kw):
    spec = parse_agent(spec_text)
    agent = spec.create(task, kw.pop("client", None))
    episode = run_episode(task, state, agent, **kw)
    questions = questions_for(task, episode)
    replies = agent.answer([visible(q) for q in questions], episode)
    correct = tuple(score(q, r)[1] for q, r in zip(questions, replies))
    return episode, EpisodeOutcome(task.task_id, task.split, task.scene_type, episode.success, episode.n_steps,
                                   episode.invalid, correct, episode.ended, episode.progress)


# The module's tests read one module build: they run in one worker, which builds it once.
pytestmark = pytest.mark.xdist_group("ie_episodes")


@pytest.fixture(scope="module")
def random_runs(tasks):
    return [run_with("random", t, s) for t, s in tasks]


def test_the_fixture_set_covers_the_real_data(tasks):
    ids = [t.task_id for t, _ in tasks]
    assert sum(i.startswith("alfred-") for i in ids) == 7  # every ALFRED trial with a plan
    assert sum(i.startswith("sllm-") for i in ids) == 27  # tasks_goal_states, less the 2 met at the start
    assert {t.scene_type for t, _ in tasks} == {"kitchen", "living_room", "bedroom", "bathroom"}


def test_the_reference_agent_succeeds_on_every_task(tasks):
    outcomes = []
    for task, state in tasks:
        episode, outcome = run_with("reference", task, state)
        assert episode.success and episode.ended == "success", (task.task_id, episode.unmet)
        assert episode.invalid == 0 and episode.n_steps == len(task.reference_plan)
        outcomes.append(outcome)
    report = summarize(outcomes)
    assert report.overall["SR"] == 1.0 and report.overall["EQA_accuracy"] == 1.0 and report.overall["SRL"] == 1.0
    assert set(report.by_scene_type) == {"kitchen", "living_room", "bedroom", "bathroom"}
    assert all(g["SR"] == 1.0 for g in [*report.by_split.values(), *report.by_scene_type.values()])


def test_the_random_agent_rarely_succeeds_and_times_out(random_runs):
    report = summarize([o for _, o in random_runs])
    print(f"\nrandom agent: {report.overall}")
    assert report.overall["SR"] <= 0.2
    assert report.overall["EQA_accuracy"] < 0.5
    for episode, outcome in random_runs:
        assert episode.n_steps <= MAX_STEPS
        if not episode.success:  # it never stops, so every failure is a timeout at the cap
            assert episode.ended == "timeout" and episode.n_steps == MAX_STEPS
        else:
            assert episode.ended == "success"
    assert report.overall["timeouts"] == sum(not e.success for e, _ in random_runs)


class Scripted:
    """An agent that plays a fixed list of choices, then stops."""

    name = "scripted"

    def __init__(self, choices):
        self.choices = list(choices)

    def start(self, task, observation):
        pass

    def act(self, observation, valid_actions):
        return self.choices.pop(0) if self.choices else STOP

    def answer(self, questions, history):
        return answer_from_log(questions, history)


def test_invalid_actions_are_recorded_and_not_fatal(tasks):
    task, state = next((t, s) for t, s in tasks if t.task_id.startswith("alfred-"))
    plan = [Action.from_dict(a) for a in task.reference_plan]
    bogus = [Action("PickupObject", ("NoSuchThing|+00.00|+00.00|+00.00",)), Unreadable(reply="dance!"),
             Action("Teleport", ())]
    episode = run_episode(task, state, Scripted([*bogus, *plan]))
    assert episode.success and episode.ended == "success"
    assert episode.invalid == 3 and episode.n_steps == len(plan) + 3
    first = episode.steps[:3]
    assert [s.valid for s in first] == [False, False, False]
    assert "no object NoSuchThing" in first[0].message
    assert first[1].action is None and first[1].text == "dance!" and "no valid action" in first[1].message
    assert "unknown action Teleport" in first[2].message
    assert not any(s.changes for s in first)  # nothing changed


def test_the_step_cap_ends_an_episode_as_a_timeout(tasks):
    task, state = tasks[0]
    env = HouseholdEnv()
    env.set_state(state)
    locations = env.scene.locations or tuple(f"loc|{i}|0|0|30" for i in range(2))
    wander = [Action("GotoLocation", (locations[i % len(locations)],)) for i in range(400)]
    episode = run_episode(task, state, Scripted(wander), env=env)
    assert episode.ended == "timeout" and episode.n_steps == MAX_STEPS == task.max_steps and not episode.success
    short = run_episode(task, state, Scripted(wander), max_steps=7)
    assert short.ended == "timeout" and short.n_steps == 7


def test_an_explicit_stop_ends_the_episode(tasks):
    task, state = tasks[0]
    for name in ("Stop", "Done"):
        episode = run_episode(task, state, Scripted([Action(name)]))
        assert episode.ended == "stop" and episode.n_steps == 0 and not episode.success
        assert len(questions_for(task, episode)) >= 15


def test_episodes_serialize_restore_and_replay(tasks, random_runs):
    for i, ((task, state), (episode, _)) in enumerate(zip(tasks, random_runs[:4])):
        again = Episode.from_json(episode.to_json())
        assert again == episode and again.to_json() == episode.to_json()
        json.loads(episode.to_json())
        # the per-step changes replay into the final metadata's view
        assert states(episode)[-1] == view(episode.final, set(episode.final_absent))
        if i == 0:  # the same agent from the same restored state runs the same episode (env reused)
            env = HouseholdEnv()
            one = run_episode(task, state, parse_agent("random").create(task), env=env)
            two = run_episode(task, state, parse_agent("random").create(task), env=env)
            assert one.to_json() == two.to_json() == episode.to_json()
        ok, _, _ = verify(Verifier.from_dict(task.verifier), episode.final)
        assert ok == episode.success


def test_metrics_match_the_formulas_on_hand_made_episodes():
    o = [EpisodeOutcome("a", "short_simple", "kitchen", True, 10, 1, (True, True, False)),
         EpisodeOutcome("b", "short_simple", "kitchen", False, 150, 7, (True, False), "timeout"),
         EpisodeOutcome("c", "long_hard", "bedroom", True, 20, 0, (False, False, False, True)),
         EpisodeOutcome("d", "long_hard", "bathroom", False, 3, 0, (), "stop")]
    m = compute(o)
    # SR = (1+0+1+0)/4; EQA = (2+1+1+0)/(3+2+4+0); SRL = (1*2+0*1+1*1+0)/9; Avg. Steps = (10+150+20+3)/4
    assert m["SR"] == 0.5
    assert m["EQA_accuracy"] == round(4 / 9, 6)
    assert m["SRL"] == round(3 / 9, 6)
    assert m["avg_steps"] == 45.75
    assert m["invalid_actions"] == 8 and m["timeouts"] == 1 and m["questions"] == 9
    report = summarize(o)
    assert report.by_split["short_simple"]["SR"] == 0.5 and report.by_split["short_simple"]["SRL"] == 0.4
    assert report.by_split["long_hard"]["EQA_accuracy"] == 0.25 and report.by_split["long_hard"]["avg_steps"] == 11.5
    assert report.by_scene_type["bathroom"]["EQA_accuracy"] is None  # no questions: undefined
    assert report.by_scene_type["kitchen"]["avg_steps"] == 80.0
    assert compute([])["SR"] is None


# -- a chat model through the loopback server ------------------------------------------------


def reference_script(pairs):
    """A scripted chat model: each step it replies with the number of the reference plan's next
    action; asked EQA, it answers from the keys of the reference episode's questions."""
    plans = {t.task_id: [str(Action.from_dict(a)) for a in t.reference_plan] for t, _ in pairs}
    gold = {}
    for task, state in pairs:
        episode = run_episode(task, state, parse_agent("reference").create(task))
        gold[task.task_id] = answer_from_log(questions_for(task, episode), episode)

    def script(request):
        system, user = (m["content"] for m in request["messages"][:2])
        task_id = re.search(r"^Task (\S+)", user, re.M).group(1)
        if system == EQA_SYSTEM:
            return "\n".join(f"{i}. {r}" for i, r in enumerate(gold[task_id], 1))
        k = int(re.search(r"^Step (\d+) of", user, re.M).group(1))
        want = plans[task_id][k - 1] if k <= len(plans[task_id]) else "Stop()"
        number = re.search(rf"^(\d+)\. {re.escape(want)}(?:  \(end the episode\))?$", user, re.M)
        return f"I choose action {number.group(1)}." if number else "no idea"
    return script


def test_a_loopback_model_following_the_reference_succeeds(tasks):
    pairs = [tasks[0], tasks[3], tasks[-1]]
    with LoopbackServer(reference_script(pairs), model="scripted") as server:
        role = ModelRole(base_url=server.base_url, model="scripted")
        spec = parse_agent(f"{server.base_url}@scripted")
        assert spec.kind == "model" and spec.role == role
        with ModelClient(None) as client:
            outcomes = [run_with(spec.spec, t, s, client=client)[1] for t, s in pairs]
        requests = server.chat_requests()
    m = compute(outcomes)
    assert m["SR"] == 1.0 and m["EQA_accuracy"] == 1.0 and m["invalid_actions"] == 0
    assert sum(o.steps for o in outcomes) + len(pairs) == len(requests)  # a request per step, one for EQA
    assert "Actions you can take now:" in requests[0]["messages"][1]["content"]


def test_a_model_replying_garbage_records_invalid_actions(tasks):
    task, state = tasks[1]
    replies = iter(["dance!", "42000", "PickupObject(Nowhere|1|2|3)", "", "<think>7?</think> hmm"] * 3)
    with LoopbackServer(lambda request: next(replies), model="garbage") as server:
        spec = parse_agent(f"{server.base_url}@garbage")
        with ModelClient(None) as client:
            agent = spec.create(task, client)
            episode = run_episode(task, state, agent, max_steps=5)
            answers = agent.answer([visible(q) for q in questions_for(task, episode)], episode)
    assert episode.ended == "timeout" and episode.n_steps == 5 and episode.invalid == 5
    assert [s.reply for s in episode.steps][:3] == ["dance!", "42000", "PickupObject(Nowhere|1|2|3)"]
    assert "not in the list" in episode.steps[1].message
    assert "no object Nowhere" in episode.steps[2].message  # written out, sent, refused by the environment
    assert "7" not in (episode.steps[4].message or "")
    assert len(answers) == len(questions_for(task, episode))


# -- forge eval --agent ------------------------------------------------------------------------


def test_forge_eval_runs_an_ie_package_and_resumes(tasks, tmp_path):
    pairs = list(tasks[:2]) + list(tasks[-2:])
    pkg = write_package(tmp_path / "pkg", pairs)
    runner = CliRunner()
    result = runner.invoke(main, ["eval", str(pkg), "--agent", "reference", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["reports"][0]
    assert report["track"] == "ie" and report["metrics"]["overall"]["SR"] == 1.0
    assert report["metrics"]["overall"]["EQA_accuracy"] == 1.0 and report["run"]["run_now"] == 4
    written = json.loads((pkg / ".eval" / "agent-reference.json").read_text())
    assert written["metrics"] == report["metrics"] and len(written["episodes"]) == 4
    # the report's records recompute its metrics
    again = summarize([EpisodeOutcome.from_record(r) for r in written["episodes"]]).to_dict()
    assert again == written["metrics"]
    # a second run reuses every stored episode
    result = runner.invoke(main, ["eval", str(pkg), "--agent", "reference"])
    assert result.exit_code == 0 and "0 run now, 4 from the store" in result.output, result.output
    with Store(pkg / ".eval") as store:
        ie = load_ie_package(pkg)
        rows = stored(store, ie.digest, parse_agent("reference").key)
        assert set(rows) == {t.task_id for t, _ in pairs}
        episode = stored_episode(store, ie.digest, parse_agent("reference").key, pairs[0][0].task_id)
        assert episode.success and episode.initial and episode.final
    # greedy on the first task only (--limit), through the Python API (forge.evaluation.evaluate)
    report = evaluate(pkg, "greedy", EvalOptions(limit=1))
    assert report["metrics"]["overall"]["episodes"] == 1 and report["agent"] == "greedy"
    # an OE spec is refused, and --agent on a package of items is a usage error
    assert runner.invoke(main, ["eval", str(pkg), "--agent", "builtin:oracle"]).exit_code == 2
    assert runner.invoke(main, ["eval", str(pkg)]).exit_code == 2


def test_forge_eval_with_a_model_on_an_ie_package(tasks, tmp_path):
    pairs = [tasks[2], tasks[-3]]
    pkg = write_package(tmp_path / "pkg", pairs)
    with LoopbackServer(reference_script(pairs), model="scripted") as server:
        result = CliRunner().invoke(main, ["eval", str(pkg), "--model", f"{server.base_url}@scripted", "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)["reports"][0]
        assert report["metrics"]["overall"]["SR"] == 1.0 and report["metrics"]["overall"]["EQA_accuracy"] == 1.0
        asked = len(server.chat_requests())
        # resumed: nothing is asked again
        result = CliRunner().invoke(main, ["eval", str(pkg), "--agent", f"{server.base_url}@scripted"])
        assert result.exit_code == 0 and len(server.chat_requests()) == asked
    assert report["simulated"] is False and report["episodes"][0]["eqa_reply"]
