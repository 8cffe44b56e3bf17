"""The server's own ground against a client with an ordinary or anonymous account, and against
its operator's slips: one server per data directory, files only the server's user may read,
tokens that cannot be stretched or revived, silent sockets that cannot crowd others out, open
WebSockets that follow their tokens, and logins and sign-ups that cannot be hammered. Each test
starts its own atoll-server (real sockets, a free loopback port) with the limits it needs.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Dict

from conftest import Raw, http_json, login_anonymous, login_email, start_server
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


# MARK: - Files only the server's user may read

def modes(root: Path) -> Dict[str, int]:
    """Every file and directory under `root` (itself included), by path relative to it: its
    permission bits."""
    found = {".": stat.S_IMODE(os.stat(root).st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


def test_the_servers_files_are_its_users_only(tmp_path: Path) -> None:
    data = tmp_path / "files" / "data"
    # A directory made by someone else with the usual modes is tightened too.
    data.mkdir(parents=True, mode=0o755)
    os.chmod(data, 0o755)
    old_umask = os.umask(0o022)
    try:
        server = start_server(tmp_path / "files")
    finally:
        os.umask(old_umask)
    try:
        login_email(server, "default", "modes@example.com")
        admin_key = (data / "admin.key").read_text().strip()
        status, body = http_json("PUT", f"{server.url}/api/admin/v1/apps/default/auth", {
            "anonymous": True, "emailPassword": {"autoConfirm": True},
            "customJWT": {"algorithm": "HS256", "secret": "s" * 40}}, token=admin_key)
        assert status == 200, body
        with Raw(server, "default", login_anonymous(server, "default")["access_token"]) as conn:
            assert conn.bind()[-1]["type"] == "uploadAck"
        found = modes(data)
        for name in ("default/data.realm", "default/data.realm-wal", "default/data.realm-shm",
                     "default/auth.realm", "default/auth.realm-wal", "default/auth.realm-shm",
                     "default/auth.key", "default/admin-auth.json", "admin.key", "atoll-server.lock"):
            assert name in found, (name, sorted(found))
        wrong = {name: oct(mode) for name, mode in found.items()
                 if mode != (0o700 if (data / name).is_dir() else 0o600)}
        assert not wrong, wrong
    finally:
        assert server.stop() == 0
