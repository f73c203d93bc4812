"""Every LIBERO task as the ``libero_tasks`` source admits it: forge's compiled verifier against
LIBERO's own success check on every control step of each reference, per suite.

    python benchmarks/libero_tasks.py [--inits 1] [--suites libero_spatial,libero_goal]

For each task at its first ``--inits`` initial states: whether the state is admitted (the
reference reaches both verifiers at its end and after no strict prefix), the reason when it is
not, and the control steps at which the two verifiers disagreed (the target is none). Prints a
table per suite and the reasons, then seconds per task. Needs the LIBERO extra.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter, defaultdict


def main() -> None:
    from forge_resources.libero import goals, runtime
    from forge_resources.libero.plans import PlanError, reference_plan
    from forge_resources.libero.tasks import LiberoTaskEnv
    from forge_skills.ie.libero import _admit

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inits", type=int, default=1, help="initial states per task (of 50)")
    ap.add_argument("--suites", default=",".join(runtime.SUITES))
    args = ap.parse_args()
    env = LiberoTaskEnv()
    rows: dict[str, list[tuple[str, str, int, int]]] = defaultdict(list)
    t0 = time.perf_counter()
    for suite in args.suites.split(","):
        for task in runtime.tasks(suite):
            for init in range(args.inits):
                env.reset({"suite": suite, "task": task, "init": init})
                bddl = [list(f) for f in env.env.parsed_problem["goal_state"]]
                reason, detail, _goal, _steps, run = _admit(env, bddl, goals, PlanError, reference_plan)
                rows[suite].append((task, reason, len(run.get("disagree", [])), run.get("checked", 0)))
                print(f"{'admitted' if not reason else 'not     '}  {suite}/{task} state {init}"
                      + (f": {reason} ({detail})" if reason else ""), flush=True)
    seconds = time.perf_counter() - t0
    print()
    print(f"{'suite':<16}{'states':>7}{'admitted':>10}{'not':>6}{'disagreements':>15}{'steps compared':>16}")
    for suite, got in rows.items():
        admitted = sum(not r[1] for r in got)
        print(f"{suite:<16}{len(got):>7}{admitted:>10}{len(got) - admitted:>6}{sum(r[2] for r in got):>15}"
              f"{sum(r[3] for r in got):>16}")
    print()
    reasons = Counter((suite, r[1]) for suite, got in rows.items() for r in got if r[1])
    for (suite, why), n in sorted(reasons.items()):
        print(f"  {suite:<16}{n:>4}  {why}")
    total = sum(len(g) for g in rows.values())
    print(f"\n{seconds:.0f} s for {total} states ({seconds / max(total, 1):.1f} s each, building each task's scene once)")


if __name__ == "__main__":
    main()
