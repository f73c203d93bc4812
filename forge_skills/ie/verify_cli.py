"""Check a terminal state against a task's goal (shipped in IE packages as ``<module>/verify.py``).

    python -m <module>.verify TASK_ID terminal_objects.json [--json]

``terminal_objects.json`` is the object metadata of the episode's last state in AI2-THOR's
schema (a live controller's ``event.metadata["objects"]``, or the household backend's
``objects()``), as a JSON list. The task's compiled verifier is read from ``answers/TASK_ID.json``
beside this module's folder. Needs only the standard library. Exit 0 when the goal holds, 1 when
it does not, 2 when the inputs cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

try:  # inside a package: the verifier modules beside this one
    from .goals import Verifier, evaluate
except ImportError:  # inside forge
    from forge_resources.household.goals import Verifier, evaluate


def check(package: Path, task_id: str, objects: list[dict]) -> dict:
    answer = json.loads((package / "answers" / f"{task_id}.json").read_text())
    success, progress, unmet = evaluate(Verifier.from_dict(answer["verifier"]), objects)
    return {"task_id": task_id, "success": success, "progress": progress, "unmet": unmet}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="check a terminal state against a task's goal")
    ap.add_argument("task_id")
    ap.add_argument("objects", help="the terminal state's object metadata (a JSON list)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    package = Path(__file__).resolve().parent.parent
    try:
        objects = json.loads(Path(args.objects).read_text())
        if isinstance(objects, dict):  # a whole event.metadata
            objects = objects["objects"]
        result = check(package, args.task_id, objects)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"verify: cannot check {args.task_id}: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{args.task_id}: {'success' if result['success'] else 'not done'} (progress {result['progress']:.2f})")
        for line in result["unmet"]:
            print(f"  unmet: {line}")
    return 0 if result["success"] else 1


if __name__ == "__main__":
    sys.exit(main())
