"""The subscribed clients of test_load.py: raw protocol clients in one asyncio loop per worker
process (started with multiprocessing's spawn, so that no library thread is forked).

Each client binds a flexible session to the load app, subscribes to every `Tick`, and from then
on reads its downloads: every `set` of `Tick.stamp` (`"<seq>:<wall time of the upload>"`) is one
delivered change, its latency the wall time now minus the stamp's.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Dict, List

SUBPROTOCOL = "atoll-sync.1"
TICK = {"name": "Tick", "primaryKey": "_id", "properties": {"_id": "int", "stamp": "string"}}


def run_worker(url: str, tokens: List[str], expected: int, ready: Any, go: Any,
               results: Any) -> None:
    """Connects `tokens` clients, puts "ready" (or an error) on `ready`, waits for the deadline
    on `go`, and puts its figures on `results`."""
    try:
        results.put(asyncio.run(_work(url, tokens, expected, ready, go)))
    except BaseException as e:  # the parent reports it; a worker must never hang it
        ready.put(f"worker failed: {e!r}")
        results.put({"error": repr(e)})


class Client:
    def __init__(self) -> None:
        self.seen: set = set()
        self.latencies: List[float] = []
        self.errors: List[str] = []
        self.conn: Any = None


async def _connect(url: str, token: str, client: Client, gate: asyncio.Semaphore) -> None:
    from websockets.asyncio.client import connect
    async with gate:
        client.conn = await connect(url, subprotocols=[SUBPROTOCOL],
                                    additional_headers={"Authorization": f"Bearer {token}"},
                                    proxy=None, compression=None, open_timeout=60,
                                    max_size=None, ping_interval=None)
        await client.conn.send(json.dumps({
            "type": "bind", "session": 1, "mode": "flexible", "file": None, "downloadCursor": 0,
            "schema": [TICK]}))
        await client.conn.send(json.dumps({
            "type": "query", "session": 1, "version": 1,
            "queries": [{"name": "all", "class": "Tick", "query": "TRUEPREDICATE", "args": []}]}))
        while True:
            m = json.loads(await asyncio.wait_for(client.conn.recv(), 60))
            if m["type"] == "queryComplete":
                return
            if m["type"] in ("error", "queryError"):
                raise RuntimeError(f"bootstrap failed: {m}")


async def _read(client: Client, expected: int, deadline: float) -> None:
    conn = client.conn
    while len(client.seen) < expected:
        left = deadline - time.time()
        if left <= 0:
            return
        try:
            text = await asyncio.wait_for(conn.recv(), left)
        except asyncio.TimeoutError:
            return
        except Exception as e:  # closed by the server: an error of this run
            client.errors.append(f"connection lost: {e!r}")
            return
        now = time.time()
        m = json.loads(text)
        kind = m["type"]
        if kind == "error":
            client.errors.append(json.dumps(m))
            continue
        if kind != "download":
            continue
        for cs in m["changesets"]:
            for ins in cs["instructions"]:
                value = None
                if ins.get("op") == "set" and ins.get("path") == ["stamp"]:
                    value = ins.get("value")
                elif ins.get("op") in ("create", "upsert"):
                    value = (ins.get("object") or {}).get("stamp")
                if not isinstance(value, str) or ":" not in value:
                    continue
                seq, sent = value.split(":", 1)
                if seq.isdigit() and int(seq) > 0 and int(seq) not in client.seen:
                    client.seen.add(int(seq))
                    client.latencies.append(now - float(sent))


async def _work(url: str, tokens: List[str], expected: int, ready: Any, go: Any) -> Dict[str, Any]:
    clients = [Client() for _ in tokens]
    gate = asyncio.Semaphore(50)
    started = time.monotonic()
    await asyncio.gather(*(_connect(url, t, c, gate) for t, c in zip(tokens, clients)))
    ready.put(f"ready {len(clients)} in {time.monotonic() - started:.1f} s")
    loop = asyncio.get_running_loop()
    deadline = await loop.run_in_executor(None, go.get)
    await asyncio.gather(*(_read(c, expected, deadline) for c in clients))
    for c in clients:
        await c.conn.close()
    return {"seen": [len(c.seen) for c in clients],
            "latencies": [x for c in clients for x in c.latencies],
            "errors": [e for c in clients for e in c.errors][:20],
            "error_count": sum(len(c.errors) for c in clients)}
