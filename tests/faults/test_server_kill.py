"""The server killed with SIGKILL while clients upload: nothing it acknowledged is lost, and the
clients resume from their cursors without a client reset.

Two writer processes commit small transactions one after another and wait for each upload
(`wait_for_upload` returned = acknowledged, printed as `A <txn>`). The server is killed at
random times and started again on the same port and data directory. While it is down, its
`data.realm` is read (SQLite, read-only) and must hold every transaction a client saw
acknowledged. A kill counts as mid-integration when a client had a committed transaction whose
upload was not acknowledged yet. At the end every writer file is opened again (its last
transactions upload) and a new client downloads everything: every committed transaction is on
the server, whole, and no client ever got a `clientReset` error.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Dict, List

import pytest

from conftest import Client, Server, report, run_client, size

ROUNDS = size(5, 100)
PER_TXN = 50
WRITERS = (0, 1_000_000)   # first txn of each writer: their ids never meet


def stored(data: Path) -> Dict[int, int]:
    """txn -> objects in the (stopped) server's data file."""
    path = data / "default" / "data.realm"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return dict(db.execute("SELECT txn, count(*) FROM Item GROUP BY txn").fetchall())
    finally:
        db.close()


def last_ack(c: Client) -> int:
    acks = c.acknowledged()
    return max(acks) if acks else -1


def test_server_killed_mid_integration(tmp_path: Path, rng) -> None:
    server = Server(tmp_path / "server-data", tmp_path / "server.log")
    server.start()
    clients: List[Client] = []
    try:
        for i, first in enumerate(WRITERS):
            clients.append(Client("write", server.url, tmp_path / f"writer-{i}", "--ack",
                                  "--first-txn", str(first), "--per-txn", str(PER_TXN),
                                  "--payload", "200", "--upload-timeout", "300"))
        for c in clients:
            c.wait_for(lambda l: l.startswith("A "), 60)

        in_flight = 0
        lost = 0
        started = time.monotonic()
        for r in range(ROUNDS):
            time.sleep(rng.uniform(0.2, 1.2))
            for c in clients:
                c.poll_lines()
            acked = {t for c in clients for t in c.acknowledged()}
            if any(max(c.committed(), default=-1) > last_ack(c) for c in clients):
                in_flight += 1
            server.kill()
            on_disk = stored(server.data)
            missing = sorted(t for t in acked if on_disk.get(t, 0) != PER_TXN)
            lost += len(missing) * PER_TXN
            assert not missing, f"round {r}: acknowledged transactions not on the server's " \
                                f"disk after a SIGKILL: {missing[:10]}"
            time.sleep(rng.uniform(0, 0.3))
            server.start()

        # Both writers go on after the last restart: they resumed.
        marks = {id(c): last_ack(c) for c in clients}
        for c in clients:
            c.wait_for(lambda l: l.startswith("A ") and int(l.split()[1]) > marks[id(c)] + 1,
                       120)
        for c in clients:
            c.kill()
        errors = [e for c in clients for e in c.errors()]
        resets = [e for e in errors if e.split()[1] == "clientReset"]
        assert not resets, f"client resets after server restarts: {resets[:5]}"

        committed: Dict[int, int] = {}
        for i, c in enumerate(clients):
            v = run_client("verify", server.url, tmp_path / f"writer-{i}")
            resets = [e for e in v.errors() if e.split()[1] == "clientReset"]
            assert not resets, f"client reset at reopening: {resets}"
            for t in c.committed():
                committed[t] = PER_TXN
        final = run_client("bootstrap", server.url, tmp_path / "final")
        have = final.have()
        missing = sorted(t for t, n in committed.items() if have.get(t) != n)
        assert not missing, f"committed transactions missing on the server: {missing[:10]}"
        partial = sorted(t for t, n in have.items() if n != PER_TXN)
        assert not partial, f"partial transactions on the server: {partial[:10]}"
        assert server.stop() == 0, f"the server's exit after SIGTERM; log:\n{server.log_tail()}"
    finally:
        for c in clients:
            c.kill()
        server.stop()

    elapsed = time.monotonic() - started
    acked = sum(len(c.acknowledged()) for c in clients)
    codes: Dict[str, int] = {}
    for e in errors:
        codes[e.split()[1]] = codes.get(e.split()[1], 0) + 1
    report("server-kill", ROUNDS, len(committed), ROUNDS, lost, 0,
           f"{acked} acknowledged uploads ({len(committed)} txns of {PER_TXN} objects) from "
           f"2 clients, all on disk after each SIGKILL; {in_flight}/{ROUNDS} kills with an "
           f"upload in flight; client resets 0; errors seen by clients {codes or 'none'}; "
           f"{elapsed:.0f} s")
