"""A full disk and read-only files: clear errors, nothing committed lost, no corruption.

The disk is a small tmpfs that the test mounts (it runs as root); where mounting is impossible
the tests skip and say so. Most of it is taken by a filler file, so that the engine runs out of
space after a few transactions; deleting the filler frees it again.

Read-only: root writes through file permissions, so the permission cases run probe.py as the
unprivileged user `nobody`; the read-only file system (a tmpfs remounted read-only) stops root
too and runs in this process.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import atoll
from conftest import HERE, Client, Server, report, size
from driver import SCHEMA, rows

NOBODY = 65534


def mount_tmpfs(directory: Path, megabytes: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs",
                           str(directory)], capture_output=True, text=True)
    if done.returncode != 0:
        message = (f"SKIPPED LOUDLY: cannot mount a tmpfs at {directory} "
                   f"({done.stderr.strip() or done.returncode}); the disk-full tests need root "
                   "and mount(8)")
        print(f"\n{'!' * 20}\n{message}\n{'!' * 20}")
        pytest.skip(message)


def unmount(directory: Path) -> None:
    if subprocess.run(["umount", str(directory)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True)


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs."""
    directory = tmp_path / "disk"
    mount_tmpfs(directory, 2)
    yield directory
    unmount(directory)


def fill(directory: Path, leave: int) -> Path:
    """Takes all but `leave` bytes of the file system with a filler file. A server writing to
    the same file system meanwhile may take the space first: then the filler stops where the
    disk is full, which is what it was for."""
    st = os.statvfs(directory)
    filler = directory / "filler"
    remaining = max(0, st.f_bavail * st.f_frsize - leave)
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as f:
        try:
            while remaining > 0:
                remaining -= f.write(chunk[:remaining])
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    return filler


def integrity(path: Path) -> str:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        db.close()


def txn_counts(realm: atoll.Realm) -> Dict[int, int]:
    out: Dict[int, int] = {}
    for item in realm.objects("Item"):
        out[item["txn"]] = out.get(item["txn"], 0) + 1
    return out


# MARK: - Disk full

def test_disk_full_on_the_device(disk: Path, rng) -> None:
    rounds = size(2, 10)
    path = disk / "full.realm"
    committed: Dict[int, int] = {}
    errors: List[str] = []
    txn = 0
    for r in range(rounds):
        per_txn, payload = rng.randint(5, 40), rng.randint(100, 2000)
        filler = fill(disk, rng.randint(100_000, 400_000))
        realm = atoll.open(path, schema=SCHEMA)
        with pytest.raises(atoll.FileError) as failed:
            for _ in range(10_000):
                with realm.write():
                    realm.create_many("Item", rows(txn, per_txn, payload))
                committed[txn] = per_txn
                txn += 1
        message = failed.value.message
        errors.append(message)
        assert "database or disk is full" in message and str(path) in message, message
        assert not realm.in_write, "the failed commit left its transaction open"
        realm.refresh()
        assert txn_counts(realm) == committed, f"round {r}: a failed commit lost data"
        realm.close()

        # The file opens while the disk is still full, with everything committed before.
        realm = atoll.open(path, schema=SCHEMA)
        assert txn_counts(realm) == committed
        realm.close()
        assert integrity(path) == "ok"

        # Space again: writes go on.
        filler.unlink()
        realm = atoll.open(path, schema=SCHEMA)
        with realm.write():
            realm.create_many("Item", rows(txn, per_txn, payload))
        committed[txn] = per_txn
        txn += 1
        realm.close()
        realm = atoll.open(path, schema=SCHEMA)
        assert txn_counts(realm) == committed
        realm.close()
        assert integrity(path) == "ok"

    report("disk-full", rounds, len(committed), rounds, 0, 0,
           f"device: {rounds} fills of a 2 MB tmpfs; each failed commit raised FileError "
           f"({errors[0][:60]}...), rolled back, kept {len(committed)} earlier txns; file "
           "reopens while full, integrity ok, writes resume once space is freed")


def test_disk_full_on_the_server(tmp_path: Path) -> None:
    """The server's data directory fills up: the upload is refused with an error, the server
    stays up and acknowledges nothing it did not store; once there is space the upload lands."""
    data = tmp_path / "server-disk"
    mount_tmpfs(data, 4)
    server = Server(data / "data", tmp_path / "server.log")
    client = None
    try:
        server.start()
        client = Client("write", server.url, tmp_path / "writer", "--ack", "--per-txn", "100",
                        "--payload", "1000", "--upload-timeout", "120")
        client.wait_for(lambda l: l.startswith("A "), 30)
        filler = fill(data, 150_000)
        line = client.wait_for(lambda l: l.startswith("E "), 60)
        assert "database or disk is full" in line, line
        assert server.alive(), f"the server died on a full disk:\n{server.log_tail()}"
        # Nothing acknowledged that is not on disk: the server's file holds every acked txn.
        acked_while_full = set(client.acknowledged())
        time.sleep(1)
        client.poll_lines()
        stuck = max(client.committed())
        assert stuck not in client.acknowledged(), "an upload the server could not store was acknowledged"
        server.stop()
        db = sqlite3.connect(f"file:{data / 'data' / 'default' / 'data.realm'}?mode=ro", uri=True)
        stored = dict(db.execute("SELECT txn, count(*) FROM Item GROUP BY txn").fetchall())
        db.close()
        missing = [t for t in acked_while_full if stored.get(t) != 100]
        assert not missing, f"acknowledged but not stored: {missing}"

        filler.unlink()
        server.start()
        client.wait_for(lambda l: l == f"A {stuck}", 60)
        assert server.alive()
    finally:
        if client is not None:
            client.kill()
        server.stop()
        unmount(data)
    report("disk-full-server", 1, len(client.acknowledged()), 1, 0, 0,
           "server data dir on a 4 MB tmpfs: the upload that did not fit was refused "
           f"({line[2:80]}...), not acknowledged, the server stayed up; after freeing space it "
           "landed")


# MARK: - Read-only

def probe(path: Path, as_nobody: bool) -> Dict[str, Any]:
    def drop() -> None:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    done = subprocess.run([sys.executable, str(HERE / "probe.py"), str(path)],
                          capture_output=True, text=True, timeout=60,
                          preexec_fn=drop if as_nobody else None, env=os.environ.copy())
    assert done.returncode == 0, f"probe failed ({done.returncode}):\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def digest(directory: Path) -> Dict[str, str]:
    """The realm files' digests (a reader may add an empty -wal and a -shm beside them)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.suffix == ".realm"}


def make_realm(path: Path, txns: int = 3) -> Dict[int, int]:
    realm = atoll.open(path, schema=SCHEMA)
    for t in range(txns):
        with realm.write():
            realm.create_many("Item", rows(t, 10, 100))
    realm.close()
    return {t: 10 for t in range(txns)}


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory the user nobody can reach (pytest's tmp_path is root's alone)."""
    directory = Path(tempfile.mkdtemp(prefix="atoll-faults-"))
    directory.chmod(0o755)
    yield directory
    for p in [directory, *directory.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
    shutil.rmtree(directory, ignore_errors=True)


def check_refused(case: str, got: Dict[str, Any], path: Path) -> None:
    """Opening for writing fails with a FileError that says what is wrong; opening read-only
    reads everything."""
    assert got["open"].startswith("FileError: "), f"{case}: {got}"
    assert str(path) in got["open"] and "read-only" in got["open"], f"{case}: {got}"
    assert got["read_only_open"] == 30, f"{case}: {got}"
    assert got["read_only_write"].startswith("ReadOnlyError: "), f"{case}: {got}"


def test_read_only_file_directory_and_file_system(shared_dir: Path, tmp_path: Path) -> None:
    seen = []
    if os.geteuid() != 0:
        pytest.skip("SKIPPED LOUDLY: the read-only cases run as root (to become nobody)")

    # A file without write permission.
    directory = shared_dir / "file"
    directory.mkdir()
    path = directory / "ro.realm"
    expected = make_realm(path)
    os.chown(directory, NOBODY, NOBODY)
    for p in directory.iterdir():
        os.chown(p, NOBODY, NOBODY)
    path.chmod(0o444)
    before = digest(directory)
    got = probe(path, as_nobody=True)
    check_refused("file 0444", got, path)
    seen.append(got["open"])
    assert digest(directory) == before, "a refused open changed the files"

    # A file in a directory without write permission (no -wal or -shm can be made).
    directory = shared_dir / "dir"
    directory.mkdir()
    path = directory / "ro.realm"
    make_realm(path)
    for p in directory.iterdir():
        os.chown(p, NOBODY, NOBODY)
    os.chown(directory, NOBODY, NOBODY)
    directory.chmod(0o555)
    before = digest(directory)
    got = probe(path, as_nobody=True)
    check_refused("directory 0555", got, path)
    seen.append(got["open"])
    assert digest(directory) == before, "a refused open changed the files"

    # A read-only file system: root cannot write either.
    mount = tmp_path / "ro-mount"
    mount_tmpfs(mount, 2)
    try:
        path = mount / "ro.realm"
        make_realm(path)
        subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
        before = digest(mount)
        got = probe(path, as_nobody=False)
        check_refused("read-only mount", got, path)
        seen.append(got["open"])
        assert digest(mount) == before
        subprocess.run(["mount", "-o", "remount,rw", str(mount)], check=True)
        realm = atoll.open(path, schema=SCHEMA)
        assert txn_counts(realm) == expected
        realm.close()
        assert integrity(path) == "ok"
    finally:
        unmount(mount)

    report("read-only", 3, 3, 3, 0, 0,
           "file 0444, directory 0555 (as nobody), read-only mount (root): open for writing "
           f"refused with FileError ({seen[0][:70]}...), read_only=True reads all, files "
           "unchanged byte for byte")
