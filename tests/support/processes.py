"""Real processes for the Python suites: an atoll-server on a free port that the system picks
(`launch_server`: the sync binding's tests, tests/hostile); for the suites that kill things
(tests/faults, tests/cluster) an atoll-server that can be killed and started again on its port
and data, and sync clients (tests/faults/driver.py) in their own processes, each printing what
happened line by line, which the test reads as they come to know what was committed or
acknowledged before it killed something.

The server is $ATOLL_SERVER (default .build/release/atoll-server); a missing one fails the test.
"""

from __future__ import annotations

import json
import os
import queue
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
SERVER = Path(os.environ.get("ATOLL_SERVER", REPO_ROOT / ".build" / "release" / "atoll-server"))
DRIVER = REPO_ROOT / "tests" / "faults" / "driver.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def terminate(proc: "subprocess.Popen[Any]", timeout: float) -> Optional[int]:
    """SIGTERM (a graceful shutdown), up to `timeout` seconds for it, then SIGKILL; the exit
    code (0 for a clean stop)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


# MARK: - The server

def _require_server() -> None:
    if not SERVER.is_file() or not os.access(SERVER, os.X_OK):
        pytest.fail(f"atoll-server not found at {SERVER}: build it (`swift build -c "
                    "release`) or set ATOLL_SERVER to its path", pytrace=False)


class LaunchedServer:
    """A running atoll-server on the port it picked (`--port 0`: its first stdout line gives the
    URL)."""

    def __init__(self, proc: subprocess.Popen, url: str, stderr_path: Path) -> None:
        self.proc = proc
        self.url = url
        self.stderr_path = stderr_path
        m = re.match(r"http://([^:/]+):(\d+)", url)
        assert m, url
        self.host, self.port = m.group(1), int(m.group(2))

    def api(self, app_id: str) -> str:
        return f"{self.url}/api/client/v2.0/app/{app_id}"

    def ws_url(self, app_id: str) -> str:
        return f"ws://{self.host}:{self.port}/api/client/v2.0/app/{app_id}/realm-sync"

    def stop(self) -> Optional[int]:
        """SIGTERM, and the exit code (0 for a clean stop)."""
        code = terminate(self.proc, timeout=20)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return code


def launch_server(data: Path, files: Path, config: Optional[Dict[str, Any]] = None,
                  log_level: str = "warning", kind: type = LaunchedServer) -> Any:
    """Starts atoll-server with its data in `data`, and its config (when given) and standard
    error in `files` (`server-config.json`, `server-stderr.log`); returns a `kind` (a
    LaunchedServer or a subclass) once it listens. Fails the test when it does not start."""
    _require_server()
    files.mkdir(parents=True, exist_ok=True)
    args = [str(SERVER), "--port", "0", "--data", str(data), "--log-level", log_level]
    if config is not None:
        config_file = files / "server-config.json"
        config_file.write_text(json.dumps(config))
        args += ["--config", str(config_file)]
    stderr_path = files / "server-stderr.log"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 15)
    line = proc.stdout.readline().decode("utf-8", "replace").strip() if ready else ""
    m = re.fullmatch(r"listening on (http://\S+)", line)
    if not m:
        proc.kill()
        proc.wait()
        pytest.fail(f"atoll-server did not start (first line {line!r}, exit code "
                    f"{proc.returncode}):\n{stderr_path.read_text(errors='replace')}",
                    pytrace=False)
    return kind(proc, m.group(1).rstrip("/"), stderr_path)


class Server:
    """An atoll-server on a fixed port and data directory (and a config file, when given), which
    can be killed and started again on both (clients reconnect to the same URL)."""

    def __init__(self, data: Path, log: Path, port: Optional[int] = None,
                 config: Optional[Path] = None) -> None:
        _require_server()
        self.data = data
        self.log = log
        self.config = config
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0

    def start(self, timeout: float = 15) -> None:
        args = [str(SERVER), "--port", str(self.port), "--data", str(self.data),
                "--log-level", "warning"]
        if self.config is not None:
            args += ["--config", str(self.config)]
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log, "ab") as stderr:
                proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=stderr)
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            line = proc.stdout.readline().decode("utf-8", "replace").strip() if ready else ""
            if line.startswith("listening on "):
                break
            proc.kill()
            proc.wait()
            proc.stdout.close()
            # The port may still be held by the killed server's last sockets for a moment.
            if time.monotonic() > deadline:
                pytest.fail(f"atoll-server did not start on port {self.port} (first line "
                            f"{line!r}, exit {proc.returncode}); log:\n{self.log_tail()}",
                            pytrace=False)
            time.sleep(0.1)
        self.proc = proc
        self.starts += 1
        threading.Thread(target=self._drain, args=(proc,), daemon=True).start()

    @staticmethod
    def _drain(proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for _ in proc.stdout:
            pass
        proc.stdout.close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL; fails the test when the server had died by itself."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"atoll-server exited by itself with {self.proc.returncode}; log:\n"
                        f"{self.log_tail()}", pytrace=False)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def stop(self) -> Optional[int]:
        """SIGTERM and wait; returns the exit code (None when it was not running)."""
        if self.proc is None:
            return None
        code = terminate(self.proc, timeout=15)
        self.proc = None
        return code

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        m = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.M)
        return float(m.group(1)) if m else 0.0

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"



# MARK: - Client processes

class Client:
    """driver.py in its own process; its output lines are collected as they come."""

    def __init__(self, command: str, url: str, directory: Path, *args: str) -> None:
        self.directory = directory
        self.lines: "queue.Queue[str]" = queue.Queue()
        self.seen: List[str] = []
        self.stderr_path = directory.with_name(directory.name + f".{command}.stderr")
        directory.mkdir(parents=True, exist_ok=True)
        with open(self.stderr_path, "ab") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, str(DRIVER), command, "--url", url, "--dir", str(directory),
                 *args], stdout=subprocess.PIPE, stderr=stderr, env=os.environ.copy())
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.proc.stdout.close()
        self.lines.put("")  # end

    def poll_lines(self) -> List[str]:
        """Lines that arrived since the last call (also appended to .seen)."""
        new = []
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line:
                new.append(line)
        self.seen.extend(new)
        return new

    def wait_for(self, predicate: Callable[[str], bool], timeout: float) -> str:
        """Waits for an output line matching `predicate`; fails on timeout or exit."""
        deadline = time.monotonic() + timeout
        while True:
            for line in self.poll_lines():
                if predicate(line):
                    return line
            if self.proc.poll() is not None and self.lines.empty():
                self._reader.join(2)
                for line in self.poll_lines():
                    if predicate(line):
                        return line
                pytest.fail(f"client exited with {self.proc.returncode} before the line "
                            f"expected; output: {self.seen[-10:]}; stderr:\n{self.stderr()}",
                            pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"client: no line expected within {timeout} s; output: "
                            f"{self.seen[-10:]}; stderr:\n{self.stderr()}", pytrace=False)
            time.sleep(0.005)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)
        self.poll_lines()

    def finish(self, timeout: float = 120) -> int:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"client did not finish within {timeout} s; output: {self.seen[-10:]}"
                        f"; stderr:\n{self.stderr()}", pytrace=False)
        self._reader.join(5)
        self.poll_lines()
        return self.proc.returncode

    def stderr(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def committed(self) -> List[int]:
        return [int(l.split()[1]) for l in self.seen if l.startswith("C ")]

    def acknowledged(self) -> List[int]:
        return [int(l.split()[1]) for l in self.seen
                if l.startswith("A ") and l.split()[1] != "all"]

    def errors(self) -> List[str]:
        return [l for l in self.seen if l.startswith("E ")]

    def have(self) -> Dict[int, int]:
        """txn -> objects, from the last HAVE line."""
        return {int(k): v for k, v in self.last_have()["txns"].items()}

    def last_have(self) -> Dict[str, Any]:
        """The last HAVE line: {"txns", "count", "digest"}."""
        for line in reversed(self.seen):
            if line.startswith("HAVE "):
                return json.loads(line[5:])
        raise AssertionError(f"no HAVE line in {self.seen[-10:]}")

    def user(self) -> str:
        """The user id the client printed (U line)."""
        for line in self.seen:
            if line.startswith("U "):
                return line.split()[1]
        raise AssertionError(f"no U line in {self.seen[-10:]}")


def run_client(command: str, url: str, directory: Path, *args: str, timeout: float = 120
               ) -> Client:
    """Runs driver.py to the end; fails unless it printed DONE and exited 0."""
    c = Client(command, url, directory, *args)
    code = c.finish(timeout)
    assert code == 0 and "DONE" in c.seen, (
        f"{command} exited with {code}; output {c.seen[-10:]}; stderr:\n{c.stderr()}")
    return c
