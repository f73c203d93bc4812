"""Nothing corrupt is carried forward: damaged or missing blobs are made again from the runs that
wrote them (or refused), damaged package files are found and replaced, `forge verify` and
`forge fsck` report damage without a traceback, and no build stays `running`."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from forge.integrity import fsck, summarize
from forge.keys import file_digest
from forge.store import Store
from forge.errors import BlobError

from conftest import copy_build, run_build


def _forge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "forge.cli", *args], capture_output=True, text=True)


def _package_blob(store: Path, reference: Path, suffix: str) -> tuple[str, str]:
    """(path in the package, blob digest) of a packaged file ending in ``suffix``."""
    listed = json.loads((reference / "manifest.json").read_text())["files"]
    rel = next(r for r in sorted(listed) if r.endswith(suffix))
    return rel, listed[rel]


def _blob(store: Path, digest: str) -> Path:
    return store / "blobs" / digest[:2] / digest


@pytest.mark.parametrize("damage", ["truncate", "delete", "flip"])
def test_damaged_media_blob_is_made_again_from_its_run_and_the_package_is_identical(built, tmp_path, damage):
    b = copy_build(built, tmp_path)
    rel, digest = _package_blob(b["store"], b["reference"], ".png")
    path = _blob(b["store"], digest)
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[:100])
    elif damage == "delete":
        path.unlink()
    else:
        path.write_bytes(data[:200] + bytes([data[200] ^ 0xFF]) + data[201:])
    with Store(b["store"], read_only=True) as s, pytest.raises(BlobError, match=digest[:16]):
        s.get_blob(digest)  # a read never hands on wrong bytes
    summary = run_build(b["intent"], b["store"], b["out"])
    assert summary["blobs_recreated"] >= 1
    got = b["out"] / b["reference"].name
    assert (got / "manifest.json").read_bytes() == (b["reference"] / "manifest.json").read_bytes()
    assert file_digest(str(got / rel)) == digest
    assert file_digest(str(path)) == digest
    assert not list(b["out"].glob(".tmp-*"))


def test_a_changed_package_file_is_replaced_on_the_next_build(built, tmp_path):
    b = copy_build(built, tmp_path)
    run_build(b["intent"], b["store"], b["out"])
    pkg = b["out"] / b["reference"].name
    media = next(p for p in sorted((pkg / "media").iterdir()))
    data = bytearray(media.read_bytes())
    data[300] ^= 0x01  # same size, one bit: only hashing finds it
    media.write_bytes(bytes(data))
    bad = _forge("verify", str(pkg))
    assert bad.returncode == 1 and "checksum differs" in bad.stdout and "Traceback" not in bad.stderr
    summary = run_build(b["intent"], b["store"], b["out"])
    assert summary["package_written"] is True
    good = _forge("verify", str(pkg), "--store", str(b["store"]))
    assert good.returncode == 0, good.stdout + good.stderr
    assert "intact" in good.stdout


def test_an_edit_that_restores_the_modification_time_is_still_found(built, tmp_path):
    """The export's record beside the package spares re-reading unchanged files; an edit that
    keeps the size and puts the modification time back still changes the ctime, so the file is
    read again, found changed and replaced."""
    import os

    b = copy_build(built, tmp_path)
    run_build(b["intent"], b["store"], b["out"])
    pkg = b["out"] / b["reference"].name
    record = json.loads((b["out"] / f".{pkg.name}.files").read_text())["files"]
    listed = json.loads((pkg / "manifest.json").read_text())["files"]
    assert {rel: v[0] for rel, v in record.items()} == {**listed, "manifest.json": file_digest(str(pkg / "manifest.json"))}
    assert run_build(b["intent"], b["store"], b["out"])["package_written"] is False  # unchanged: left alone
    media = next(p for p in sorted((pkg / "media").iterdir()))
    before = media.stat()
    data = bytearray(media.read_bytes())
    data[300] ^= 0x01
    media.write_bytes(bytes(data))
    os.utime(media, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert media.stat().st_mtime_ns == before.st_mtime_ns and media.stat().st_size == before.st_size
    assert run_build(b["intent"], b["store"], b["out"])["package_written"] is True
    assert file_digest(str(media)) == listed[str(media.relative_to(pkg))]


def test_verify_reports_every_kind_of_package_damage_without_a_traceback(built, tmp_path):
    pkg = tmp_path / "pkg"
    shutil.copytree(built["package"], pkg)
    media = sorted((pkg / "media").iterdir())
    media[0].write_bytes(media[0].read_bytes()[:60])  # a truncated PNG
    items = (pkg / "items.jsonl").read_text().splitlines()
    items[1] = items[1][:25]  # a line cut short
    (pkg / "items.jsonl").write_text("\n".join(items) + "\n")
    answers = (pkg / "answers.jsonl").read_bytes()
    (pkg / "answers.jsonl").write_bytes(answers[:40] + b"\xff\xfe" + answers[42:])
    (pkg / "extra.txt").write_text("not released")
    done = _forge("verify", str(pkg), "--store", str(built["store"]), "--json")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout)
    problems = "\n".join(report["file_problems"])
    assert f"{media[0].relative_to(pkg)}: checksum differs" in problems
    assert "items.jsonl: checksum differs" in problems and "answers.jsonl: checksum differs" in problems
    assert "items.jsonl line 2: not JSON" in problems
    assert "extra.txt: not listed in the manifest" in problems
    assert report["reverified"] and report["invalid"] >= 1
    reasons = " ".join(report["reasons"].values())
    assert "cannot be re-verified" in reasons or "not a processed RGB image" in reasons
    # reverify, the answer-only check, survives the same damage
    rv = _forge("reverify", str(pkg), "--store", str(built["store"]), "--json")
    assert rv.returncode == 1 and "Traceback" not in rv.stderr
    assert json.loads(rv.stdout)["invalid"] >= 1
    # and a package without its manifest is named as such, exit 2
    (pkg / "manifest.json").unlink()
    gone = _forge("verify", str(pkg))
    assert gone.returncode == 2 and "not a package" in gone.stderr


def test_fsck_finds_and_repairs_what_provenance_allows(built, tmp_path):
    b = copy_build(built, tmp_path)
    _, media_digest = _package_blob(b["store"], b["reference"], ".png")
    _blob(b["store"], media_digest).write_bytes(b"not a png")
    with Store(b["store"]) as s:
        arrays = s.one("SELECT json_extract_string(content, '$.arrays') FROM artifacts WHERE type = 'SourceRecord' "
                       "ORDER BY id LIMIT 1")[0]
        s.execute("INSERT INTO verifications (artifact_id, requirement_id, passed) VALUES ('nothing', 'X-1', true)")
        s.execute("INSERT INTO builds VALUES ('dead-build', 'x', 'y', now(), NULL, 'running', NULL)")
    _blob(b["store"], arrays).unlink()  # a simulator's arrays: re-rendered from the scene
    (b["store"] / "blobs" / "ab").mkdir(exist_ok=True)
    (b["store"] / "blobs" / "ab" / ".tmp-123").write_bytes(b"half")
    check = _forge("fsck", "--store", str(b["store"]), "--json")
    assert check.returncode == 1, check.stderr
    kinds = json.loads(check.stdout)["kinds"]
    assert {"damaged_blob", "missing_blob", "orphan_verifications", "interrupted_build", "temp_file"} <= set(kinds)
    fixed = _forge("fsck", "--store", str(b["store"]), "--repair", "--json")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    report = json.loads(fixed.stdout)
    assert report["unrepaired"] == 0 and report["kinds"]["missing_blob"]["repaired"] == 1
    assert file_digest(str(_blob(b["store"], arrays))) == arrays
    assert file_digest(str(_blob(b["store"], media_digest))) == media_digest
    with Store(b["store"]) as s:
        assert summarize(fsck(s))["findings"] == []
        assert s.one("SELECT status FROM builds WHERE build_id = 'dead-build'")[0] == "failed"


def test_fsck_counts_every_damaged_blob_it_repairs(built, tmp_path):
    """One producer re-run re-makes its sibling blobs too: they are still counted, found and
    repaired, because everything is found before anything is re-made."""
    b = copy_build(built, tmp_path)
    with Store(b["store"], read_only=True) as s:
        runs = [json.loads(x) for (x,) in s.execute("SELECT blobs FROM skill_runs WHERE status = 'ok' AND blobs "
                                                    "IS NOT NULL ORDER BY run_key").fetchall()]
    siblings = next(r for r in runs if len(r) >= 3)[:3]
    for digest in siblings:
        path = _blob(b["store"], digest)
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    fixed = _forge("fsck", "--store", str(b["store"]), "--repair", "--json")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert json.loads(fixed.stdout)["kinds"]["damaged_blob"] == {"found": 3, "repaired": 3}
    assert all(file_digest(str(_blob(b["store"], d))) == d for d in siblings)


def test_an_immutable_store_folder_is_named_as_refusing_writes_not_as_damage(built, tmp_path):
    b = copy_build(built, tmp_path)
    if subprocess.run(["chattr", "+i", str(b["store"])], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not allowed here (needs CAP_LINUX_IMMUTABLE)")
    try:
        done = _forge("build", str(b["intent"]), "--store", str(b["store"]), "--out", str(b["out"]), "--quiet")
    finally:
        subprocess.run(["chattr", "-i", str(b["store"])], capture_output=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "the system refuses to write to the store" in done.stderr and "operation not permitted" in done.stderr
    assert "damaged" not in done.stderr.replace("nothing in it is damaged", "")
    again = _forge("build", str(b["intent"]), "--store", str(b["store"]), "--out", str(b["out"]), "--quiet")
    assert again.returncode == 0, again.stderr[-2000:]  # nothing was lost


def test_store_faults_are_named_without_a_traceback(built, tmp_path):
    b = copy_build(built, tmp_path)
    db = b["store"] / "forge.duckdb"
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    done = _forge("status", "--store", str(b["store"]))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "damaged" in done.stderr and "another forge" not in done.stderr
    db.write_bytes(b"\x00" * 4096 + data[4096:])
    done = _forge("build", str(b["intent"]), "--store", str(b["store"]), "--out", str(b["out"]), "--quiet")
    assert done.returncode == 1 and "Traceback" not in done.stderr and "damaged" in done.stderr


def test_a_held_store_is_named_as_busy_and_blobs_are_readable_by_others(built, tmp_path):
    b = copy_build(built, tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(60)", str(b["store"] / "forge.duckdb")],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        done = _forge("audit", "x", "--store", str(b["store"]))
        assert done.returncode == 1 and "another forge process" in done.stderr and "Traceback" not in done.stderr
        assert "is writing to the store (a build); it cannot be read until that process ends" in done.stderr
        assert "wait" not in done.stderr.split("hint:")[0]  # a reader is refused at once, and told so
    finally:
        holder.kill()
        holder.wait()
    some = next(p for p in (b["store"] / "blobs").rglob("*") if p.is_file())
    assert some.stat().st_mode & 0o044 == 0o044  # group and others may read a shared store


def test_an_unwritable_output_folder_fails_the_build_cleanly(built, tmp_path):
    b = copy_build(built, tmp_path)
    blocker = tmp_path / "out-is-a-file"
    blocker.write_text("")
    done = _forge("build", str(b["intent"]), "--store", str(b["store"]), "--out", str(blocker / "sub"), "--quiet")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "cannot create the package folder" in done.stderr
    with Store(b["store"], read_only=True) as s:
        assert s.one("SELECT count(*) FROM builds WHERE status = 'running'")[0] == 0
        assert s.one("SELECT status FROM builds ORDER BY started_at DESC LIMIT 1")[0] == "failed"


def test_two_exports_into_one_folder_do_not_break_each_other(built, tmp_path):
    import threading

    from forge.artifact_types import Package
    from forge.export import export

    with Store(built["store"], read_only=True) as s:
        content = s.one("SELECT content FROM artifacts WHERE type = 'Package' AND status = 'verified' "
                        "ORDER BY created_at DESC LIMIT 1")[0]
        pkg = Package.model_validate_json(content)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                export(s, pkg, tmp_path / "out")
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        for _ in range(5):  # each round: an empty folder, four exports at once
            shutil.rmtree(tmp_path / "out", ignore_errors=True)
            threads = [threading.Thread(target=run) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert errors == []
    assert _forge("verify", str(tmp_path / "out" / f"{pkg.name}-{pkg.version}")).returncode == 0
    assert not list((tmp_path / "out").glob(".tmp-*")) and not list((tmp_path / "out").glob(".old-*"))


@pytest.mark.slow
def test_readers_during_a_build_never_break_it(built, tmp_path):
    """`forge verify` and `forge audit` against a store while a build writes to it: the readers
    are told the store is busy (or read a snapshot before the build opens it); the build ends
    well either way."""
    b = copy_build(built, tmp_path)
    (b["store"] / "forge.duckdb").unlink()  # a fresh database: the build has real work to do
    shutil.rmtree(b["store"] / "blobs")
    build = subprocess.Popen([sys.executable, "-m", "forge.cli", "build", str(b["intent"]), "--store",
                              str(b["store"]), "--out", str(b["out"]), "--quiet"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outcomes = []
    while build.poll() is None:
        r = _forge("verify", str(built["package"]), "--store", str(b["store"]))
        assert "Traceback" not in r.stderr
        outcomes.append(r.returncode)
    assert build.returncode == 0, build.stderr.read()
    assert outcomes and set(outcomes) <= {0, 1, 2}
    final = _forge("verify", str(b["out"] / built["package"].name), "--store", str(b["store"]))
    assert final.returncode == 0, final.stdout + final.stderr


@pytest.fixture
def read_only_copy(built, tmp_path):
    """The shared build's store and package on a read-only file system (a tmpfs mounted and
    remounted read-only; needs the privilege to mount, else the test is skipped)."""
    mount = tmp_path / "ro"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=200m", "none", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a file system here (needs root): " + done.stderr.decode().strip())
    try:
        shutil.copytree(built["store"], mount / "store")
        shutil.copytree(built["package"], mount / "package")
        assert subprocess.run(["mount", "-o", "remount,ro", str(mount)]).returncode == 0
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def test_a_read_only_store_is_read_but_never_written(built, tmp_path, read_only_copy):
    ro = read_only_copy
    done = _forge("build", str(built["intent"]), "--store", str(ro / "store"), "--out", str(tmp_path / "o"), "--quiet")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "read-only" in done.stderr and "another forge" not in done.stderr
    ok = _forge("verify", str(ro / "package"), "--store", str(ro / "store"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    b = copy_build(built, tmp_path)
    out = _forge("build", str(b["intent"]), "--store", str(b["store"]), "--out", str(ro / "out"), "--quiet")
    assert out.returncode == 1 and "Traceback" not in out.stderr and "--out DIR on a writable disk" in out.stderr
