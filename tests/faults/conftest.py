"""Fault tests: shared setup (the library, sizes, the report; the server and the client
processes come from tests/support/processes.py).

The binaries come from $ATOLL_LIBRARY and $ATOLL_SERVER (default .build/release/); a missing
one fails the tests. ATOLL_STRESS=1 runs the full sizes (100 rounds of each kill); without it
the suites run a few rounds each, in CI time. ATOLL_FAULTS_SEED fixes the random seed (each
test prints the one it used). When ATOLL_STRESS_REPORT names a file, each suite appends one
JSON line per kind of fault: {"suite", "rounds", "operations", "faults", "lost", "crashes",
"figures"}.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
sys.path.insert(0, str(REPO_ROOT / "bindings" / "python" / "src"))
sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
os.environ.setdefault("ATOLL_LIBRARY", str(REPO_ROOT / ".build" / "release" / "libatoll.so"))

import atoll  # noqa: E402
# The tests import these from here.
from processes import Client, Server, run_client  # noqa: E402,F401

STRESS = os.environ.get("ATOLL_STRESS", "") not in ("", "0")


def size(small: int, full: int) -> int:
    """`full` under ATOLL_STRESS=1, else `small`."""
    return full if STRESS else small


@pytest.fixture
def rng(request: Any) -> random.Random:
    seed = int(os.environ.get("ATOLL_FAULTS_SEED", random.randrange(1 << 32)))
    print(f"\n{request.node.name}: seed {seed} (ATOLL_FAULTS_SEED={seed} repeats it)")
    return random.Random(seed)


def report(suite: str, rounds: int, operations: int, faults: int, lost: int, crashes: int,
           figures: str) -> None:
    """Prints the suite's summary, and appends it to $ATOLL_STRESS_REPORT when set."""
    line = {"suite": suite, "rounds": rounds, "operations": operations, "faults": faults,
            "lost": lost, "crashes": crashes, "figures": figures}
    print(f"\n{json.dumps(line)}")
    target = os.environ.get("ATOLL_STRESS_REPORT")
    if target:
        with open(target, "a") as f:
            f.write(json.dumps(line) + "\n")


# MARK: - The server

@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = Server(tmp_path / "server-data", tmp_path / "server.log")
    s.start()
    yield s
    s.stop()
