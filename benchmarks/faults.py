"""Fault injection: damage a finished build at random and see what forge does about it.

    python benchmarks/faults.py [--trials 15] [--items 120] [--seed 7]

One small build is made once; every trial copies it and damages one thing at a random offset:
a store blob the package uses (truncated, bytes flipped, deleted; the package is then removed, so
the build must write it again from the store), a package file (truncated,
bytes flipped, deleted), the database's write-ahead log, or the database file. Then it does
what a user would: `forge verify` the package, `forge build` again (after `forge fsck --repair`
when the build names the store damaged), and `forge verify --store` at the end. Per kind of
damage it prints how many trials were

  detected          some command reported the damage (exit code and message, or a re-made blob)
  repaired          the final package is intact, valid and identical to the undamaged one
  refused           forge stopped with a clear message and shipped nothing damaged
  no effect         the damage hit bytes nothing reads (the final package is identical, no report)
  silently ignored  a damaged or wrong package came out and no command said so (target 0)
  traceback         any command printed a Python traceback (target 0)
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("blob", "package_file", "wal", "database")


def forge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forge.cli", *args], capture_output=True, text=True)


def prepare(work: Path, items: int) -> Path:
    intent = yaml.safe_load((ROOT / "examples" / "tabletop_spatial.yaml").read_text())
    intent["oe"]["items"] = items
    path = work / "intent.yaml"
    path.write_text(yaml.safe_dump(intent, sort_keys=False))
    done = forge("build", str(path), "--store", str(work / "store"), "--out", str(work / "out"), "--quiet")
    if done.returncode != 0:
        sys.exit(f"the reference build failed:\n{done.stderr}")
    return next(p for p in (work / "out").iterdir() if p.is_dir() and not p.name.startswith("."))


def leave_wal(store: Path) -> None:
    """A store whose last transactions are still in the write-ahead log (a writer killed before
    its checkpoint), as a crash leaves it."""
    code = ("import duckdb, os, signal, sys; c = duckdb.connect(sys.argv[1]); c.execute('PRAGMA disable_checkpoint_on_shutdown'); "
            "c.execute(\"INSERT INTO meta VALUES ('fault-probe', 'x')\"); "
            "c.execute(\"UPDATE builds SET summary = summary WHERE false\"); os.kill(os.getpid(), signal.SIGKILL)")
    subprocess.run([sys.executable, "-c", code, str(store / "forge.duckdb")], capture_output=True)


def damage_file(path: Path, rng: random.Random) -> str:
    data = path.read_bytes()
    how = rng.choice(["truncate", "flip", "delete"])
    if how == "delete" or not data:
        path.unlink()
        return "deleted"
    at = rng.randrange(len(data))
    if how == "truncate":
        path.write_bytes(data[:at])
        return f"truncated at {at}"
    flipped = bytearray(data)
    for i in range(at, min(len(data), at + rng.randint(1, 8))):
        flipped[i] ^= 0xFF
    path.write_bytes(bytes(flipped))
    return f"flipped bytes at {at}"


def trial(kind: str, reference: Path, pristine: Path, work: Path, rng: random.Random) -> dict:
    shutil.copytree(pristine, work)
    store, out, intent = work / "store", work / "out", work / "intent.yaml"
    package = out / reference.name
    manifest = json.loads((reference / "manifest.json").read_text())["files"]
    if kind == "blob":
        rel = rng.choice(sorted(manifest))
        digest = manifest[rel]
        what = f"blob of {rel}: " + damage_file(store / "blobs" / digest[:2] / digest, rng)
        shutil.rmtree(package)  # the package is written again from the store (or to a new --out)
    elif kind == "package_file":
        rel = rng.choice(sorted(manifest) + ["manifest.json"])
        what = f"{rel}: " + damage_file(package / rel, rng)
    elif kind == "wal":
        leave_wal(store)
        wal = store / "forge.duckdb.wal"
        what = "write-ahead log: " + (damage_file(wal, rng) if wal.exists() else "absent")
    else:
        what = "database: " + damage_file(store / "forge.duckdb", rng)

    runs: list[subprocess.CompletedProcess] = []
    if package.exists():
        runs.append(forge("verify", str(package)))
    build = forge("build", str(intent), "--store", str(store), "--out", str(out), "--quiet", "--json")
    runs.append(build)
    if build.returncode != 0 and "fsck" in build.stderr:
        runs.append(forge("fsck", "--store", str(store), "--repair"))
        build = forge("build", str(intent), "--store", str(store), "--out", str(out), "--quiet", "--json")
        runs.append(build)
    final = forge("verify", str(package), "--store", str(store))
    runs.append(final)

    traceback = any("Traceback" in r.stderr for r in runs)
    reported = any(r.returncode != 0 for r in runs)  # the final verify counts: it is a command a user runs
    if build.returncode == 0:
        summary = json.loads(build.stdout)
        reported = reported or summary.get("blobs_recreated", 0) > 0
    identical = (package / "manifest.json").exists() and \
        (package / "manifest.json").read_bytes() == (reference / "manifest.json").read_bytes()
    intact = final.returncode == 0 and identical
    outcome = {"kind": kind, "what": what, "traceback": traceback, "detected": reported}
    if intact:
        outcome["result"] = "repaired" if reported else "no effect"
    elif build.returncode != 0 and not traceback:
        outcome["result"] = "refused"
    else:
        outcome["result"] = "silently ignored" if not reported else "refused"
    return outcome


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=15, help="trials per kind of damage")
    ap.add_argument("--items", type=int, default=120)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="forge-faults-"))
    pristine = base / "pristine"
    pristine.mkdir()
    reference_in_pristine = prepare(pristine, args.items)
    reference = base / "reference" / reference_in_pristine.name  # the package's own folder name
    shutil.copytree(reference_in_pristine, reference)
    rows: dict[str, dict[str, int]] = {k: {} for k in KINDS}
    examples: list[dict] = []
    n = 0
    for kind in KINDS:
        for _ in range(args.trials):
            n += 1
            result = trial(kind, reference, pristine, base / f"t{n}", rng)
            shutil.rmtree(base / f"t{n}", ignore_errors=True)
            counts = rows[kind]
            counts["trials"] = counts.get("trials", 0) + 1
            counts[result["result"]] = counts.get(result["result"], 0) + 1
            counts["detected"] = counts.get("detected", 0) + int(result["detected"])
            counts["traceback"] = counts.get("traceback", 0) + int(result["traceback"])
            if result["result"] == "silently ignored" or result["traceback"]:
                examples.append(result)
            print(f"  {n:>3} {kind:<13} {result['result']:<17} {result['what']}", flush=True)
    cols = ("trials", "detected", "repaired", "refused", "no effect", "silently ignored", "traceback")
    print(f"\n{'damage':<14}" + "".join(f"{c:>18}" for c in cols))
    for kind in KINDS:
        print(f"{kind:<14}" + "".join(f"{rows[kind].get(c, 0):>18}" for c in cols))
    total = {c: sum(rows[k].get(c, 0) for k in KINDS) for c in cols}
    print(f"{'all':<14}" + "".join(f"{total[c]:>18}" for c in cols))
    for e in examples:
        print(f"  {e}")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
