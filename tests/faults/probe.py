"""Tries a realm file the way an app would, in its own process (the read-only tests run it as
an unprivileged user: root writes through file permissions). Prints one JSON object:

    {"open": "ok" | "<Error>: <message>",          open for writing
     "write": "ok" | "<Error>: <message>",         a transaction, when the open worked
     "read_only_open": <count> | "<Error>: <message>",   open with read_only=True, count Items
     "read_only_write": "<Error>: <message>"}

Usage: python probe.py PATH
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "bindings" / "python" / "src"))

import atoll  # noqa: E402

from driver import SCHEMA  # noqa: E402


def failure(e: atoll.AtollError) -> str:
    return f"{type(e).__name__}: {e.message}"


def main() -> int:
    path = sys.argv[1]
    out = {}
    try:
        realm = atoll.open(path, schema=SCHEMA)
        out["open"] = "ok"
        try:
            with realm.write():
                realm.create("Item", {"_id": "probe", "txn": -1, "n": 0, "payload": "p"})
            out["write"] = "ok"
        except atoll.AtollError as e:
            out["write"] = failure(e)
        realm.close()
    except atoll.AtollError as e:
        out["open"] = failure(e)
    try:
        realm = atoll.open(path, read_only=True)
        out["read_only_open"] = len(realm.objects("Item"))
        try:
            with realm.write():
                realm.create("Item", {"_id": "probe", "txn": -1, "n": 0, "payload": "p"})
            out["read_only_write"] = "ok"
        except atoll.AtollError as e:
            out["read_only_write"] = failure(e)
        realm.close()
    except atoll.AtollError as e:
        out["read_only_open"] = failure(e)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
