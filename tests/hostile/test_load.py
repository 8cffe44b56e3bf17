"""Fan-out under load over loopback: ATOLL_LOAD_CLIENTS subscribed clients (default 100; `make
stress`: 1,000), one writer changing one object every 100 ms for ATOLL_LOAD_SECONDS (default 10;
`make stress`: 60). Every client must see every change, the p99 delivery (upload sent → client
has read the download) must be under a second, and the server's RSS must stay flat after
warm-up.

The clients are raw protocol clients (loadclients.py) in ATOLL_LOAD_WORKERS asyncio processes
(default: one per 500 clients). Each is its own anonymous user, logged in through the app API
first: a thousand users, files and sessions is what a thousand devices are (one user with many
sessions would share a user record and rules, and hide per-user costs). The writer is a raw
client too, so that the upload's wall time can travel in the change (`Tick.stamp`) and every
delivery be measured on arrival.
"""

from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
import os
import resource
import threading
import time
from pathlib import Path
from typing import Any, Dict, List

from conftest import Raw, Server, login_anonymous, percentile, report, start_server
import loadclients

CLIENTS = int(os.environ.get("ATOLL_LOAD_CLIENTS", "100"))
SECONDS = float(os.environ.get("ATOLL_LOAD_SECONDS", "10"))
WORKERS = int(os.environ.get("ATOLL_LOAD_WORKERS", str(max(1, math.ceil(CLIENTS / 500)))))
INTERVAL = 0.1
APP = "load"
# Every client comes from 127.0.0.1, each its own anonymous user: no per-address caps (the
# defaults, 256 connections and 100 new users a minute, are for the open internet).
CONFIG = {"maxConnectionsPerAddress": 0, "maxSignupsPerAddressPerMinute": 0,
          "apps": [{"id": APP, "developmentMode": True}]}


def raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        assert hard >= needed or hard == resource.RLIM_INFINITY, (
            f"{needed} file descriptors are needed; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def test_fan_out_to_many_subscribed_clients(tmp_path: Path) -> None:
    # The server inherits the limit: one descriptor per client, and as many on this side.
    raise_fd_limit(2 * CLIENTS + 256)
    server = start_server(tmp_path, CONFIG)
    try:
        run(server)
    finally:
        alive = server.proc.poll() is None
        code = server.stop()
        assert alive and code == 0, (code, server.stderr_path.read_text(errors="replace")[-3000:])


def run(server: Server) -> None:
    changes = int(SECONDS / INTERVAL)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        tokens = [l["access_token"] for l in pool.map(lambda _: login_anonymous(server, APP),
                                                      range(CLIENTS))]
    # The writer, and the object it changes.
    writer = Raw(server, APP, login_anonymous(server, APP)["access_token"])
    writer.bind(schema=[loadclients.TICK])
    writer.subscribe(cls="Tick")
    writer.upload([{"op": "create", "class": "Tick", "primaryKey": 1, "object": {"stamp": "0:0"}}])
    assert writer.until(lambda m: m["type"] in ("uploadAck", "error"))[-1]["type"] == "uploadAck"

    ctx = multiprocessing.get_context("spawn")
    ready, go, results = ctx.Queue(), ctx.Queue(), ctx.Queue()
    per = math.ceil(CLIENTS / WORKERS)
    procs = [ctx.Process(target=loadclients.run_worker,
                         args=(server.ws_url(APP), tokens[i * per:(i + 1) * per], changes,
                               ready, go, results), daemon=True)
             for i in range(WORKERS)]
    for p in procs:
        p.start()
    try:
        notes = [ready.get(timeout=300) for _ in procs]
        assert all(n.startswith("ready") for n in notes), notes
        rss: List[int] = [server.rss_kb()]
        cpu_before = server.cpu_seconds()
        start = time.time()
        deadline = start + SECONDS + 30
        for _ in procs:
            go.put(deadline)

        # RSS once a second while the writer runs.
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(1.0):
                rss.append(server.rss_kb())
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()

        acked = 0
        late = 0
        for seq in range(1, changes + 1):
            due = start + seq * INTERVAL
            pause = due - time.time()
            if pause > 0:
                time.sleep(pause)
            else:
                late += 1
            writer.upload([{"op": "set", "class": "Tick", "primaryKey": 1, "path": ["stamp"],
                            "value": f"{seq}:{time.time():.6f}"}])
            # Read what came back meanwhile (acks), without waiting.
            while True:
                try:
                    m = writer.recv(timeout=0)
                except TimeoutError:
                    break
                assert m["type"] != "error", m
                if m["type"] == "uploadAck":
                    acked = max(acked, m["clientVersion"])
        end_rss = server.rss_kb()
        writing_acked = acked
        # Every upload acknowledged (the clients meanwhile read until they have every change).
        ack_deadline = time.monotonic() + 30
        while acked < changes and time.monotonic() < ack_deadline:
            try:
                m = writer.recv(timeout=max(0.0, ack_deadline - time.monotonic()))
            except TimeoutError:
                break
            assert m["type"] != "error", m
            if m["type"] == "uploadAck":
                acked = max(acked, m["clientVersion"])
        outs = [results.get(timeout=SECONDS + 120) for _ in procs]
        server_cpu = server.cpu_seconds() - cpu_before
        stop.set()
        sampler.join()
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
        writer.close()
    failed = [o["error"] for o in outs if "error" in o]
    assert failed == [], failed
    seen = [n for o in outs for n in o["seen"]]
    latencies = [x for o in outs for x in o["latencies"]]
    errors = sum(o["error_count"] for o in outs)
    delivered = sum(seen)
    missing = CLIENTS * changes - delivered
    warm_index = min(len(rss) - 1, max(1, int(len(rss) * 0.2)))
    warm = rss[warm_index]
    p50, p99 = percentile(latencies, .5) * 1000, percentile(latencies, .99) * 1000
    # The slowest deliveries by change: whether the tail is a few stalls or a steady drift.
    worst: Dict[int, float] = {}
    for o in outs:
        for n, took in o["worst_by_change"].items():
            worst[n] = max(worst.get(n, 0.0), took)
    slow = sorted(worst.items(), key=lambda kv: -kv[1])[:5]
    over = sum(1 for took in worst.values() if took >= 1.0)
    worst = max(latencies) * 1000
    figures = (f"{CLIENTS} clients, {changes} changes: p50 {p50:.0f} ms, p99 {p99:.0f} ms, max "
               f"{worst:.0f} ms; {delivered} deliveries; RSS {rss[0] / 1024:.0f} MB connected, "
               f"{warm / 1024:.0f} MB warm ({warm_index} s) -> {end_rss / 1024:.0f} MB at the end; "
               f"writer late {late} times, {writing_acked} acknowledged while writing; CPU: server {server_cpu:.0f} s, clients "
               f"{sum(o.get('cpu_seconds', 0) for o in outs):.0f} s in {SECONDS:.0f} s; load "
               f"average {os.getloadavg()[0]:.1f}; changes with a delivery >= 1 s: {over}, "
               f"slowest (change @ s: max ms) "
               + ", ".join(f"{n} @ {n * INTERVAL:.1f}: {took * 1000:.0f}" for n, took in slow))
    report(f"load-{CLIENTS}", rounds=changes, operations=delivered, faults=0, lost=missing,
           crashes=0 if server.proc.poll() is None else 1, figures=figures)
    assert errors == 0, [e for o in outs for e in o["errors"]]
    assert acked == changes, f"the writer's uploads acknowledged: {acked} of {changes}"
    assert missing == 0, f"{missing} deliveries missing; fewest seen by a client: {min(seen)}"
    assert p99 < 1000, figures
    # Flat: after warm-up the server grows by less than 10 % (+16 MB for allocator noise).
    assert end_rss <= warm * 1.10 + 16 * 1024, figures
