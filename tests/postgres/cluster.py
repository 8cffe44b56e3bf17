"""A throwaway PostgreSQL cluster for tests: Debian's PostgreSQL server binaries
(`/usr/lib/postgresql/<version>/bin`, package `postgresql`), one cluster in a directory of its
own, listening on 127.0.0.1 only, on a free port (never the default 5432, so a cluster that
Debian's package started does not matter), with its Unix socket inside that directory, trust
authentication (nothing but this machine's loopback can reach it) and `fsync=off` (a crash of
the machine may lose it: it is thrown away anyway).

    python3 tests/postgres/cluster.py start DIR   # prints postgresql://postgres@127.0.0.1:PORT/atoll
    python3 tests/postgres/cluster.py fresh URL   # a new, uniquely named database on that cluster
    python3 tests/postgres/cluster.py stop DIR    # stops the cluster and removes DIR

DIR must be empty or not exist. As root the cluster belongs to the `postgres` system user
(initdb refuses to run as root): DIR is given to that user, which must be able to reach it (a
parent directory with mode 0700, such as pytest's, is not: use one under /tmp). As any other
user the cluster is that user's.

From Python: `start(dir) -> url`, `stop(dir)`, `fresh_database(url) -> url`,
`drop_database(url)`, `psql(url, sql) -> str`. Only the standard library is used, and `psql`
(package `postgresql-client`, which `postgresql` brings).
"""

from __future__ import annotations

import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional
from urllib.parse import urlsplit, urlunsplit

SUPERUSER = "postgres"
DATABASE = "atoll"
# The file that says a directory is one of ours: `stop` removes nothing without it.
MARKER = "atoll-test-cluster"
# A Unix socket's path must fit in sockaddr_un (107 bytes with PostgreSQL's file name).
SOCKET_PATH_MAX = 90


class ClusterError(Exception):
    """A step failed; the message says which, with the command's output or the server's log."""


# MARK: - Binaries and users

def bin_dir() -> Path:
    """The newest `/usr/lib/postgresql/<version>/bin` that has initdb (ATOLL_PG_BIN overrides)."""
    override = os.environ.get("ATOLL_PG_BIN")
    if override:
        path = Path(override)
        if not (path / "initdb").is_file():
            raise ClusterError(f"ATOLL_PG_BIN={override} has no initdb")
        return path
    found = []
    for d in Path("/usr/lib/postgresql").glob("*/bin"):
        version = d.parent.name
        if (d / "initdb").is_file() and (d / "pg_ctl").is_file() and re.fullmatch(r"\d+(\.\d+)?", version):
            found.append((tuple(int(p) for p in version.split(".")), d))
    if not found:
        raise ClusterError("no PostgreSQL server binaries in /usr/lib/postgresql/*/bin: install "
                           "Debian's `postgresql` package (`make deps`)")
    return max(found)[1]


def psql_path() -> str:
    for candidate in (bin_dir() / "psql", shutil.which("psql")):
        if candidate and Path(candidate).is_file():
            return str(candidate)
    raise ClusterError("psql not found: install Debian's `postgresql-client` (`make deps`)")


def _as_owner() -> List[str]:
    """The command prefix that runs a server tool as the cluster's owner."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise ClusterError(f"running as root, but there is no `{SUPERUSER}` system user to own "
                           "the cluster (initdb refuses root): install Debian's `postgresql`")
    return ["runuser", "-u", SUPERUSER, "--"]


def _run(args: List[str], what: str, cwd: Optional[Path] = None, timeout: float = 120) -> str:
    try:
        done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ClusterError(f"{what}: `{' '.join(args)}` did not finish within {timeout} s")
    except OSError as e:
        raise ClusterError(f"{what}: cannot run `{args[0]}`: {e}")
    if done.returncode != 0:
        raise ClusterError(f"{what}: `{' '.join(args)}` exited with {done.returncode}:\n"
                           f"{done.stdout}{done.stderr}".rstrip())
    return done.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _log_tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# MARK: - Start and stop

def start(directory: os.PathLike, attempts: int = 5) -> str:
    """Makes and starts a cluster in `directory` (empty or new) with the database `atoll`;
    returns its URL. Raises ClusterError naming the step that failed (its log stays in
    `directory`; `stop` removes it)."""
    root = Path(directory).absolute()
    if root.exists() and any(root.iterdir()):
        raise ClusterError(f"{root} is not empty: a new cluster needs an empty directory")
    root.mkdir(parents=True, exist_ok=True)
    (root / MARKER).write_text("a throwaway PostgreSQL cluster made by tests/postgres/cluster.py\n")
    socket_dir = root / "socket"
    if len(str(socket_dir)) > SOCKET_PATH_MAX:
        raise ClusterError(f"{root} is too long a path for the cluster's Unix socket "
                           f"(at most {SOCKET_PATH_MAX - len('/socket')} characters)")
    socket_dir.mkdir()
    owner = _as_owner()
    if owner:
        user = pwd.getpwnam(SUPERUSER)
        for path in (root, socket_dir):
            os.chown(path, user.pw_uid, user.pw_gid)
        os.chmod(root, 0o700)
        probe = subprocess.run([*owner, "test", "-w", str(root)], cwd="/", capture_output=True)
        if probe.returncode != 0:
            raise ClusterError(f"the `{SUPERUSER}` user cannot reach {root}: a parent directory "
                               "is closed to it (mode 0700?); use a directory under /tmp")
    bindir = bin_dir()
    data = root / "data"
    log = root / "postgres.log"
    _run([*owner, str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust",
          "-E", "UTF8", "--locale=C", "--no-sync"], "initdb", cwd=root)
    with open(data / "postgresql.conf", "a") as conf:
        conf.write("\n# tests/postgres/cluster.py\ninclude_if_exists = 'atoll-test.conf'\n")
    for attempt in range(attempts):
        port = _free_port()
        (data / "atoll-test.conf").write_text(
            f"listen_addresses = '127.0.0.1'\nport = {port}\n"
            f"unix_socket_directories = '{socket_dir}'\n"
            "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            "max_connections = 200\n")
        if owner:
            os.chown(data / "atoll-test.conf", pwd.getpwnam(SUPERUSER).pw_uid, -1)
        started = subprocess.run([*owner, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log),
                                  "-w", "-t", "60", "start"], cwd=root, capture_output=True, text=True)
        if started.returncode == 0:
            break
        # Another process may have taken the port between our probe and the server's bind.
        if "already in use" not in _log_tail(log, 5) or attempt == attempts - 1:
            raise ClusterError(f"pg_ctl start exited with {started.returncode}: "
                               f"{started.stdout}{started.stderr}\nlog ({log}):\n{_log_tail(log)}")
    url = f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{DATABASE}"
    psql(_with_database(url, "postgres"), f'CREATE DATABASE "{DATABASE}"')
    return url


def stop(directory: os.PathLike) -> None:
    """Stops the cluster in `directory` (if it runs) and removes the directory. Refuses a
    directory that `start` did not make."""
    root = Path(directory).absolute()
    if not root.exists():
        return
    if not (root / MARKER).is_file():
        raise ClusterError(f"{root} was not made by tests/postgres/cluster.py (no {MARKER} file): "
                           "not removing it")
    data = root / "data"
    if (data / "postmaster.pid").exists():
        stopped = subprocess.run([*_as_owner(), str(bin_dir() / "pg_ctl"), "-D", str(data), "-m",
                                  "immediate", "-w", "-t", "60", "stop"], cwd="/",
                                 capture_output=True, text=True)
        if stopped.returncode != 0 and (data / "postmaster.pid").exists():
            raise ClusterError(f"pg_ctl stop exited with {stopped.returncode}: {stopped.stdout}"
                               f"{stopped.stderr}; {root} is left in place")
    shutil.rmtree(root)


# MARK: - Databases

def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def _database(url: str) -> str:
    name = urlsplit(url).path.lstrip("/")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ClusterError(f"{url}: the database name must be letters, digits and _")
    return name


def psql(url: str, sql: str, timeout: float = 60) -> str:
    """Runs `sql` with psql on `url`; returns its unaligned, tuples-only output."""
    if not url.startswith(("postgresql://", "postgres://")):
        raise ClusterError(f"not a PostgreSQL URL: {url!r}")
    return _run([psql_path(), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url,
                 "-c", sql], "psql", cwd=Path("/"), timeout=timeout)


def fresh_database(url: str) -> str:
    """Creates a new, uniquely named database on `url`'s cluster; returns its URL."""
    name = f"atoll_{int(time.time())}_{secrets.token_hex(4)}"
    psql(_with_database(url, "postgres"), f'CREATE DATABASE "{name}"')
    return _with_database(url, name)


def drop_database(url: str) -> None:
    """Drops `url`'s database, closing the connections that are still open to it."""
    psql(_with_database(url, "postgres"), f'DROP DATABASE IF EXISTS "{_database(url)}" WITH (FORCE)')


# MARK: - Command line

def main(argv: List[str]) -> int:
    usage = "usage: cluster.py start DIR | stop DIR | fresh URL"
    if len(argv) != 2 or argv[0] not in ("start", "stop", "fresh"):
        print(usage, file=sys.stderr)
        return 2
    command, arg = argv
    try:
        if command == "start":
            print(start(arg), flush=True)
        elif command == "stop":
            stop(arg)
        else:
            print(fresh_database(arg), flush=True)
    except ClusterError as e:
        print(f"cluster.py {command}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
