"""One atoll-server on its SQLite store behind nginx, with the config of docs/deploy.md
(WebSocket upgrade, round robin, next upstream on error): sync and the app API go through the
proxy, and when the instance is killed and started again behind it, the clients resume through
the proxy with nothing lost and no client reset. Needs no PostgreSQL: it runs everywhere the
suite runs, and proves the proxy part of the cluster tests on its own.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import List

from conftest import (Instance, Nginx, config, last_ack, settle_and_compare, start_writers,
                      wait_acked_past, wait_until, where)
from processes import Client

WRITERS = 2
PER_TXN = 5


def test_clients_sync_through_nginx_and_resume_after_the_instance_restarts(
        tmp_path: Path) -> None:
    started = time.monotonic()
    conf = tmp_path / "atoll.json"
    conf.write_text(json.dumps(config(None), indent=2))
    solo = Instance("solo", conf, tmp_path / "solo-data", tmp_path / "solo.log")
    proxy = Nginx(tmp_path / "nginx", [solo])
    writers: List[Client] = []
    try:
        writers += start_writers(WRITERS, proxy.url, tmp_path, PER_TXN)
        users = {c.user() for c in writers}
        wait_until(lambda: where([solo], users), 10, "the writers in the instance's admin API")

        for c in writers:
            c.poll_lines()
        marks = {id(c): last_ack(c) for c in writers}
        solo.kill()
        solo.start()
        wait_acked_past(writers, marks, 60)
        wait_until(lambda: where([solo], users), 10,
                   "the writers in the restarted instance's admin API")
        for c in writers:
            c.kill()
        summary = settle_and_compare(tmp_path, writers, proxy.url, [solo], PER_TXN)
    finally:
        for c in writers:
            c.kill()
        proxy.stop()
        code = solo.stop()
    assert code == 0, f"the instance's exit after SIGTERM: {code}; log:\n{solo.log_tail()}"
    print(f"\n{summary}; {time.monotonic() - started:.0f} s")
