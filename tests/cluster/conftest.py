"""Several atoll-server instances on one PostgreSQL database, behind nginx (docs/deploy.md).

What the tests need, all real: a PostgreSQL cluster whose URL is in $ATOLL_TEST_POSTGRES
(`make test` starts one with tests/postgres/cluster.py; each test gets a fresh database on it),
the server ($ATOLL_SERVER, default .build/release/atoll-server), the library
($ATOLL_LIBRARY) for the Python sync clients, and Debian's nginx ($ATOLL_NGINX, default `nginx`
on PATH or /usr/sbin/nginx; package nginx-light). Without $ATOLL_TEST_POSTGRES the tests skip,
saying so; a missing server, library or nginx fails them.

Each instance has its own --data directory (a local cache), its own port, and the same config:
`"store": {"postgres": URL}`, the admin key, and one app, `default`, with the fault tests'
`Item` schema (tests/faults/driver.py), flexible sync and rules that let everyone read and write.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO_ROOT / "bindings" / "python" / "src"))
sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
sys.path.insert(0, str(REPO_ROOT / "tests" / "postgres"))
# The fault tests' client (driver.py) and its schema serve here too.
sys.path.append(str(REPO_ROOT / "tests" / "faults"))
os.environ.setdefault("ATOLL_LIBRARY", str(REPO_ROOT / ".build" / "release" / "libatoll.so"))

import atoll  # noqa: E402,F401  (a missing library fails here, not in a client process)
import cluster as pg  # noqa: E402
from driver import SCHEMA  # noqa: E402
# The tests import these from here.
from helpers import http_json, wait_until  # noqa: E402,F401
from processes import Client, Server, free_port  # noqa: E402

POSTGRES = os.environ.get("ATOLL_TEST_POSTGRES", "")
ADMIN_KEY = "cluster-test-admin-key-0123456789"
APP = "default"
INSTANCES = 3


def config(database: Optional[str]) -> Dict[str, Any]:
    """The instances' config; without a database, the SQLite store in --data."""
    c: Dict[str, Any] = {
        "admin": {"key": ADMIN_KEY},
        "apps": [{
            "id": APP, "schema": SCHEMA,
            "sync": {"mode": "flexible", "queryableFields": ["txn"]},
            "auth": {"anonymous": True, "emailPassword": {"autoConfirm": True}},
            "rules": {"default": {"roles": [{"name": "everyone", "read": True, "write": True}]}},
        }],
    }
    if database:
        c["store"] = {"postgres": database}
    return c


# MARK: - PostgreSQL

@pytest.fixture
def database() -> Iterator[str]:
    """A new database on $ATOLL_TEST_POSTGRES's cluster, dropped after the test."""
    if not POSTGRES:
        pytest.skip("ATOLL_TEST_POSTGRES is not set: these tests need a PostgreSQL URL "
                    "(`make test` starts a cluster; by hand: "
                    "`python3 tests/postgres/cluster.py start DIR`)")
    url = pg.fresh_database(POSTGRES)
    yield url
    pg.drop_database(url)


def tables(database: str) -> List[str]:
    """The tables the server made in the database (any schema but PostgreSQL's own)."""
    out = pg.psql(database, "SELECT table_schema || '.' || table_name FROM information_schema.tables "
                            "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1")
    return out.split()


def assert_stored_in_postgres(database: str) -> None:
    """Fails when the servers wrote nothing to the database: they ignored "store"."""
    found = tables(database)
    assert found, ("the database named in the config's \"store\" has no tables after the "
                   "instances accepted writes: atoll-server ignored \"store\" (each instance "
                   "kept its own SQLite data)")


def assert_history_gapless(database: str) -> int:
    """The history in the database is versions 1...n, each once; returns n."""
    count, first, last = (int(x) for x in pg.psql(
        database, "SELECT count(*), coalesce(min(version), 1), coalesce(max(version), 0) "
                  f"FROM atoll_sync_history WHERE app = '{APP}'").replace("|", " ").split())
    assert count > 0, "no history in the database after the writes"
    assert (first, last) == (1, count), (
        f"the history has {count} versions from {first} to {last}: "
        "versions were skipped or taken twice")
    return count


# MARK: - Instances

class Instance(Server):
    """One atoll-server of the cluster: its own port and --data, the shared config; it can be
    killed, and started again on both."""

    def __init__(self, name: str, config_path: Path, data: Path, log: Path) -> None:
        super().__init__(data, log, config=config_path)
        self.name = name
        self.start()

    def __repr__(self) -> str:
        return f"<instance {self.name} {self.url}>"

    def api(self, path: str) -> str:
        """The app API's URL for `path` (after /api/client/v2.0/app/default/)."""
        return f"{self.url}/api/client/v2.0/app/{APP}/{path}"

    def admin(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = http_json(method, f"{self.url}/api/admin/v1{path}", body, token=ADMIN_KEY)
        assert status == 200, f"{self.name}: admin {method} {path}: {status} {answer}"
        return answer

    def connections(self) -> Dict[str, str]:
        """The users connected to this instance by sync: user id -> connection id."""
        answer = self.admin("GET", f"/apps/{APP}/sync")
        return {c["user"]: str(c["id"]) for c in answer["connections"]}

    def count(self, query: str = "TRUEPREDICATE", *args: Any) -> int:
        """How many Items this instance finds (admin API, its view of the shared store)."""
        answer = self.admin("POST", f"/apps/{APP}/query",
                            {"class": "Item", "query": query, "args": list(args), "limit": 1})
        return int(answer["count"])


@pytest.fixture
def instances(tmp_path: Path, database: str) -> Iterator[List[Instance]]:
    """INSTANCES atoll-servers on one fresh database; stopped after the test, each of which
    must then exit 0 unless the test killed it."""
    config_path = tmp_path / "atoll.json"
    config_path.write_text(json.dumps(config(database), indent=2))
    started: List[Instance] = []
    try:
        for i in range(INSTANCES):
            name = "abc"[i] if i < 3 else str(i)
            started.append(Instance(name, config_path, tmp_path / f"instance-{name}-data",
                                    tmp_path / f"instance-{name}.log"))
        yield started
    finally:
        # Killed ones are left out; one that died by itself is not.
        exits = {s.name: s.stop() for s in started if s.proc is not None}
    bad = {name: code for name, code in exits.items() if code != 0}
    assert not bad, f"instances that did not exit 0 after SIGTERM (-9: killed after 15 s): {bad}"


# MARK: - nginx

def nginx_binary() -> str:
    found = os.environ.get("ATOLL_NGINX") or shutil.which("nginx") or (
        "/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if not found:
        pytest.fail("nginx not found (ATOLL_NGINX, PATH, /usr/sbin/nginx): install Debian's "
                    "nginx-light (`make deps`)", pytrace=False)
    return found


NGINX_CONF = """\
# Generated by tests/cluster/conftest.py: a load balancer for {count} atoll-server instances.
{user}worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 1024; }}
http {{
    access_log {dir}/access.log;
    client_body_temp_path {dir}/temp/body;
    proxy_temp_path {dir}/temp/proxy;
    fastcgi_temp_path {dir}/temp/fastcgi;
    uwsgi_temp_path {dir}/temp/uwsgi;
    scgi_temp_path {dir}/temp/scgi;

    # WebSocket upgrades pass through; other requests close the upstream connection.
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ''      close;
    }}

    upstream atoll {{
        # Round robin; an instance that refuses or times out is skipped for fail_timeout.
{servers}
    }}

    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://atoll;
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_connect_timeout 2s;
            # A request that could not reach an instance goes to the next one (never a request
            # an instance has already received: nginx does not resend those).
            proxy_next_upstream error timeout;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
        }}
    }}
}}
"""


class Nginx:
    """nginx in the foreground with a generated config, in front of the instances."""

    def __init__(self, directory: Path, upstreams: List[Instance]) -> None:
        self.dir = directory
        (directory / "temp").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        servers = "\n".join(f"        server 127.0.0.1:{u.port} max_fails=1 fail_timeout=10s;"
                            for u in upstreams)
        # As root, the workers would otherwise run as `nobody`, who cannot enter pytest's
        # directories (mode 0700) for the temp files.
        user = "user root;\n" if os.geteuid() == 0 else ""
        conf = directory / "nginx.conf"
        conf.write_text(NGINX_CONF.format(count=len(upstreams), user=user, dir=directory,
                                          servers=servers, port=self.port))
        with open(directory / "stderr.log", "wb") as stderr:
            self.proc = subprocess.Popen(
                [nginx_binary(), "-p", str(directory), "-c", str(conf), "-e",
                 str(directory / "error.log"), "-g", "daemon off;"],
                stdout=subprocess.DEVNULL, stderr=stderr)

        def up() -> bool:
            if self.proc.poll() is not None:
                pytest.fail(f"nginx exited with {self.proc.returncode}:\n{self.errors()}",
                            pytrace=False)
            status, _ = self.get("/health")
            return status == 200
        wait_until(up, 15, f"nginx on port {self.port} to answer GET /health")

    def get(self, path: str) -> Tuple[int, Any]:
        try:
            return http_json("GET", f"{self.url}{path}")
        except OSError:
            return 0, None

    def errors(self) -> str:
        text = ""
        for name in ("stderr.log", "error.log"):
            try:
                text += (self.dir / name).read_text(errors="replace")[-3000:]
            except OSError:
                pass
        return text

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)   # graceful shutdown
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def nginx(tmp_path: Path, instances: List[Instance]) -> Iterator[Nginx]:
    n = Nginx(tmp_path / "nginx", instances)
    yield n
    n.stop()


# MARK: - Clients

def where(instances: List[Instance], users: Set[str]) -> Optional[Dict[str, Instance]]:
    """user -> the live instance its sync connection is on, once every one of `users` is
    connected to one of `instances` (None until then)."""
    found: Dict[str, Instance] = {}
    for s in instances:
        if s.alive():
            for user in s.connections():
                if user in users:
                    found[user] = s
    return found if set(found) >= users else None


def start_writers(count: int, url: str, tmp_path: Path, per_txn: int) -> List[Client]:
    """`count` writer processes (driver.py write --ack; their transaction numbers never meet),
    each its own user and file in tmp_path/writer-<i>; returns once each was acknowledged."""
    writers = [Client("write", url, tmp_path / f"writer-{i}", "--ack", "--first-txn",
                      str(i * 1_000_000), "--per-txn", str(per_txn), "--payload", "64",
                      "--upload-timeout", "120")
               for i in range(count)]
    try:
        for c in writers:
            c.wait_for(lambda l: l.startswith("A "), 60)
    except BaseException:
        for c in writers:
            c.kill()
        raise
    return writers


def last_ack(c: Client) -> int:
    acks = c.acknowledged()
    return max(acks) if acks else -1


def wait_acked_past(clients: List[Client], marks: Dict[int, int], seconds: float) -> None:
    """Waits until each client was acknowledged a transaction after its mark (by id(client))
    plus one, the one that may have been in flight at the mark."""
    for c in clients:
        c.wait_for(lambda l, m=marks[id(c)]: l.startswith("A ") and int(l.split()[1]) > m + 1,
                   seconds)


def run_all(command: str, urls: List[str], dirs: List[Path], *args: str, timeout: float = 120
            ) -> List[Client]:
    """driver.py `command` in one process per directory, all at once; fails unless each
    printed DONE and exited 0."""
    clients = [Client(command, url, d, *args) for url, d in zip(urls, dirs)]
    for c in clients:
        code = c.finish(timeout)
        assert code == 0 and "DONE" in c.seen, (
            f"{command} in {c.directory.name} exited with {code}; output {c.seen[-10:]}; "
            f"stderr:\n{c.stderr()}")
    return clients


def settle_and_compare(tmp_path: Path, writers: List[Client], proxy: str,
                       served_by: List[Instance], per_txn: int) -> str:
    """After the writers were killed: every writer's file is opened again through the proxy
    (its committed, unacknowledged transactions upload), then again to settle (download),
    then a new client bootstraps from each of `served_by` directly. Fails unless no client had
    a client reset, every instance serves the same objects, every acknowledged and every
    committed transaction is there whole, and every file holds exactly those objects. Returns
    a summary."""
    dirs = [c.directory for c in writers]
    reopened = run_all("verify", [proxy] * len(dirs), dirs)
    # Every upload is in; each instance must have caught up with the others' before the files
    # settle through whichever instance the proxy picks.
    versions: Dict[str, float] = {}

    def agree() -> bool:
        versions.update({s.name: s.metric("atoll_history_version") for s in served_by})
        return len(set(versions.values())) == 1
    wait_until(agree, 30, lambda: f"the instances to agree on the newest version "
                                  f"(atoll_history_version: {versions})")
    settled = run_all("verify", [proxy] * len(dirs), dirs, "--settle")
    served = run_all("bootstrap", [s.url for s in served_by],
                     [tmp_path / f"fresh-{s.name}" for s in served_by])

    errors = [e for c in writers + reopened + settled + served for e in c.errors()]
    resets = [e for e in errors if e.split()[1] == "clientReset"]
    assert not resets, f"client resets: {resets[:5]}"

    views = {s.name: c.last_have() for s, c in zip(served_by, served)}
    assert len({v["digest"] for v in views.values()}) == 1, (
        "the instances serve different data (objects, digest): "
        f"{ {n: (v['count'], v['digest'][:12]) for n, v in views.items()} }")
    server = served[0].have()
    acked = {t for c in writers for t in c.acknowledged()}
    committed = {t for c in writers for t in c.committed()}
    lost = sorted(t for t in acked if server.get(t) != per_txn)
    assert not lost, f"acknowledged transactions lost or partial: {lost[:10]} (of {len(acked)})"
    missing = sorted(t for t in committed if server.get(t) != per_txn)
    assert not missing, f"committed transactions missing after the files were reopened: " \
                        f"{missing[:10]}"
    partial = sorted(t for t, n in server.items() if n != per_txn)
    assert not partial, f"partial transactions on the server: {partial[:10]}"

    digest = served[0].last_have()["digest"]
    differ = {c.directory.name: c.last_have()["count"]
              for c in settled if c.last_have()["digest"] != digest}
    assert not differ, (f"files that differ from the server's {sum(server.values())} objects "
                        f"(objects in each): {differ}")

    codes: Dict[str, int] = {}
    for e in errors:
        codes[e.split()[1]] = codes.get(e.split()[1], 0) + 1
    return (f"{len(acked)} acknowledged transactions ({len(committed)} committed) of {per_txn} "
            f"objects from {len(writers)} writers, none lost; {len(settled) + len(served)} "
            f"replicas equal ({sum(server.values())} objects); errors seen by clients "
            f"{codes or 'none'}")
