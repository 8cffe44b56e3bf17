"""The server's own ground against a client with an ordinary or anonymous account, and against
its operator's slips: one server per data directory, files only the server's user may read,
tokens that cannot be stretched or revived, silent sockets that cannot crowd others out, open
WebSockets that follow their tokens, and logins and sign-ups that cannot be hammered. Each test
starts its own atoll-server (real sockets, a free loopback port) with the limits it needs.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import http_json, start_server
from processes import SERVER


# MARK: - One server per data directory

def test_a_second_server_on_the_same_data_directory_refuses_to_start(tmp_path: Path) -> None:
    first = start_server(tmp_path / "first")
    try:
        second = subprocess.run([str(SERVER), "--port", "0", "--data", str(tmp_path / "first" / "data")],
                                capture_output=True, timeout=30)
        message = second.stderr.decode(errors="replace")
        assert second.returncode != 0, (second.returncode, second.stdout, message)
        assert b"listening on" not in second.stdout, second.stdout
        assert "another atoll-server is using the data directory" in message, message
        # The first one goes on serving.
        assert http_json("GET", f"{first.url}/health")[1]["status"] == "ok"
    finally:
        assert first.stop() == 0
    # Once it stopped, the directory is free again.
    again = start_server(tmp_path / "first")
    assert http_json("GET", f"{again.url}/health")[1]["status"] == "ok"
    assert again.stop() == 0
