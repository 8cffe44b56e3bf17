#!/usr/bin/env python3
"""The benchmark workloads from Python: through the `atoll` package, or through Python's own
`sqlite3` module (the reference for the binding).

    python_bench.py atoll DIR N      # the atoll binding (libatoll through ctypes)
    python_bench.py sqlite3 DIR N    # the standard library's sqlite3 module

Prints "<name> <seconds>" lines, "check <name> <value>" lines and "#" comments, like the other
contenders; bench/run parses them. When `atoll` cannot be imported, the atoll mode prints
"skip <reason>" and exits 0.

`atoll` is imported as installed; failing that, from bindings/python/src of this checkout (the
library itself is found as the binding says: $ATOLL_LIBRARY, which bench/run sets).
"""

import os
import sys
import time

BENCH_SEED = 20240601
W4_READS = 100_000
BATCH = 10_000
MASK = (1 << 64) - 1


def random_keys(n):
    """The benchmark's shared random keys: splitmix64 from a fixed seed, key = next % n."""
    state = BENCH_SEED
    keys = []
    for _ in range(W4_READS):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z = z ^ (z >> 31)
        keys.append(z % n)
    return keys


def emit(name, seconds):
    print(f"{name} {seconds:.6f}", flush=True)


SCHEMA = [{
    "name": "Item", "primaryKey": "_id",
    "properties": {"_id": "int", "name": "string", "age": {"type": "int", "indexed": True},
                   "owner": "string"},
}]


def import_atoll():
    try:
        import atoll  # noqa: F401
        return atoll, None
    except ImportError:
        pass
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python", "src")
    sys.path.insert(0, os.path.normpath(src))
    try:
        import atoll
        return atoll, None
    except Exception as e:  # ImportError, or a half-finished package failing otherwise
        return None, f"{type(e).__name__}: {e}".replace("\n", " | ")


def file_bytes(path):
    """The database's size as SQLite sees it (page count x page size, the WAL's committed pages
    included), on a read-only connection of its own."""
    import sqlite3
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()


def run_atoll(directory, n):
    atoll, problem = import_atoll()
    if atoll is None:
        print(f"skip the atoll Python package is not importable ({problem})")
        return
    print(f"# Python {sys.version.split()[0]}, atoll {atoll.__version__} "
          f"(libatoll {atoll.library_version()} from {atoll.library_path()}), N={n}")
    realm = atoll.open(os.path.join(directory, "py.realm"), schema=SCHEMA)

    # W1: create_many in batches of BATCH dicts, one write transaction.
    t0 = time.perf_counter()
    with realm.write():
        for start in range(0, n, BATCH):
            realm.create_many("Item", [
                {"_id": i, "name": f"name-{i}", "age": i % 100, "owner": f"owner-{i % 1000}"}
                for i in range(start, min(start + BATCH, n))])
    emit("W1", time.perf_counter() - t0)
    print("W1_file", file_bytes(os.path.join(directory, "py.realm")))

    # W2: count age == 42, 100 times.
    t0 = time.perf_counter()
    for _ in range(100):
        c = len(realm.objects("Item").filter("age == $0", 42))
    emit("W2", time.perf_counter() - t0)
    print(f"check W2 {c}")

    # W3: count owner == 'owner-7' AND age > 50, 10 times.
    t0 = time.perf_counter()
    for _ in range(10):
        c = len(realm.objects("Item").filter("owner == $0 AND age > $1", "owner-7", 50))
    emit("W3", time.perf_counter() - t0)
    print(f"check W3 {c}")

    # W4: 100,000 primary-key reads of name.
    keys = random_keys(n)
    total = 0
    t0 = time.perf_counter()
    for k in keys:
        total += len(realm.get("Item", k)["name"])
    emit("W4", time.perf_counter() - t0)
    print(f"check W4 {total}")

    # W5: age + 1 on every object: batches of BATCH read with a primary-key range query (as
    # raw SQLite reads by key), each batch's modified objects written back with
    # create_many(update="modified"), one transaction.
    items = realm.objects("Item")
    updated = 0
    t0 = time.perf_counter()
    with realm.write():
        for start in range(0, n, BATCH):
            batch = list(items.filter("_id >= $0 AND _id < $1", start, start + BATCH))
            updated += realm.create_many(
                "Item", [{"_id": o["_id"], "age": o["age"] + 1} for o in batch], update="modified")
    emit("W5", time.perf_counter() - t0)
    if updated != n:
        sys.exit(f"python_bench: W5 updated {updated} objects, not {n}")
    total = 0
    for offset in range(0, n, BATCH):
        total += sum(o["age"] for o in items[offset:offset + BATCH])
    print(f"check W5 {total}")
    realm.close()


def run_sqlite3(directory, n):
    import sqlite3
    print(f"# Python {sys.version.split()[0]}, sqlite3 module (SQLite {sqlite3.sqlite_version}), N={n}")
    conn = sqlite3.connect(os.path.join(directory, "py.sqlite"), isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE item (_id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                 " age INTEGER NOT NULL, owner TEXT NOT NULL)")
    conn.execute("CREATE INDEX item_age ON item (age)")

    # W1: executemany over a generator, one transaction.
    t0 = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO item (_id, name, age, owner) VALUES (?, ?, ?, ?)",
                     ((i, f"name-{i}", i % 100, f"owner-{i % 1000}") for i in range(n)))
    conn.execute("COMMIT")
    emit("W1", time.perf_counter() - t0)
    print("W1_file", file_bytes(os.path.join(directory, "py.sqlite")))

    t0 = time.perf_counter()
    for _ in range(100):
        c = conn.execute("SELECT count(*) FROM item WHERE age = ?", (42,)).fetchone()[0]
    emit("W2", time.perf_counter() - t0)
    print(f"check W2 {c}")

    # W3 as one would write it (SQLite then takes the age index: the planner trap).
    t0 = time.perf_counter()
    for _ in range(10):
        c = conn.execute("SELECT count(*) FROM item WHERE owner = ? AND age > ?", ("owner-7", 50)).fetchone()[0]
    emit("W3", time.perf_counter() - t0)
    print(f"check W3 {c}")

    keys = random_keys(n)
    total = 0
    t0 = time.perf_counter()
    for k in keys:
        total += len(conn.execute("SELECT name FROM item WHERE _id = ?", (k,)).fetchone()[0])
    emit("W4", time.perf_counter() - t0)
    print(f"check W4 {total}")

    # W5: read every row, write each back with its own UPDATE, one transaction.
    t0 = time.perf_counter()
    conn.execute("BEGIN")
    rows = conn.execute("SELECT _id, age FROM item").fetchall()
    conn.executemany("UPDATE item SET age = ? WHERE _id = ?", ((age + 1, id_) for id_, age in rows))
    conn.execute("COMMIT")
    emit("W5", time.perf_counter() - t0)
    print(f"check W5 {conn.execute('SELECT sum(age) FROM item').fetchone()[0]}")
    conn.close()


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("atoll", "sqlite3"):
        sys.exit("usage: python_bench.py atoll|sqlite3 DIR N")
    n = int(sys.argv[3])
    if n < 1000:
        sys.exit("python_bench: N must be >= 1000")
    (run_atoll if sys.argv[1] == "atoll" else run_sqlite3)(sys.argv[2], n)


if __name__ == "__main__":
    main()
