#!/usr/bin/env python3
"""Aggregates the contenders' output into the benchmark table (Python 3 standard library only).

    report.py OUTDIR N RUNS

OUTDIR holds, for each contender C and run R (1-based), `C.R.out` (its stdout: "<name> <seconds>",
"check <name> <value>", "skip <reason>", "#" comments) and `C.R.rc` (its exit status). Prints the
table of medians with throughput ratios and targets, the details, the spread of the runs and
whether the contenders' check values agree. Exits 1 when a contender failed or checks disagree.
"""

import os
import statistics
import sys

# (key, column title); the order of the table's columns.
CONTENDERS = [
    ("raw", "raw C"),
    ("swift", "Swift"),
    ("cabi", "C ABI"),
    ("python", "Python"),
    ("pysqlite", "python sqlite3"),
]

WORKLOADS = [
    ("W1", "W1 insert N, 1 txn"),
    ("W2", "W2 count age==42 x100"),
    ("W3", "W3 count owner&age>50 x10"),
    ("W4", "W4 100k pk reads of name"),
    ("W5", "W5 age+1 each, 1 txn"),
    ("D1", "D1 insert N/10 owners x 10 list items"),
    ("D2", "D2 count owner.name==k x100 (link)"),
    ("D3", "D3 count backlinks>=2 x10"),
    ("D4", "D4 count list contains 7 x10"),
]

# Targets from the issue: (workload, contender) -> (minimum throughput ratio, reference key).
# W1/W5: Swift >= 0.8x raw, C ABI >= 0.6x raw; Python W1 >= 1.0x python sqlite3.
# W2-W4: Swift and C ABI within 1.2x of raw SQLite's best time, i.e. ratio >= 1/1.2.
TARGETS = {
    ("W1", "swift"): 0.8, ("W1", "cabi"): 0.6, ("W1", "python"): 1.0,
    ("W5", "swift"): 0.8, ("W5", "cabi"): 0.6,
}
for _w in ("W2", "W3", "W4"):
    TARGETS[(_w, "swift")] = 1 / 1.2
    TARGETS[(_w, "cabi")] = 1 / 1.2
# The data-model workloads (Swift only): within 1.5x of the hand-written SQL's time.
for _w in ("D1", "D2", "D3", "D4"):
    TARGETS[(_w, "swift")] = 1 / 1.5

TARGET_TEXT = {
    "W1": "Swift>=0.8x C-ABI>=0.6x Py>=1.0x sqlite3",
    "W2": "Swift,C-ABI time<=1.2x raw",
    "W3": "Swift,C-ABI time<=1.2x raw",
    "W4": "Swift,C-ABI time<=1.2x raw",
    "W5": "Swift>=0.8x C-ABI>=0.6x",
    "D1": "Swift time<=1.5x raw",
    "D2": "Swift time<=1.5x raw",
    "D3": "Swift time<=1.5x raw",
    "D4": "Swift time<=1.5x raw",
}

# Detail lines worth showing: (contender, name, what it is, reference for a ratio or None).
DETAILS = [
    ("raw", "W3_index", "raw W3 with the planner's plan (age index)", None),
    ("raw", "W3_scan", "raw W3 with the index hidden (+age: table scan)", None),
    ("raw", "W4_txn", "raw W4 inside one read transaction (reference)", None),
    ("raw", "W5_single", "raw W5 as one UPDATE ... SET age = age + 1 (reference)", None),
    ("swift", "W1_build", "Swift W1: of which building the Documents", None),
    ("swift", "W1_each", "Swift W1 with create() one by one (fresh file)", ("raw", "W1")),
    ("swift", "W5_read", "Swift W5: of which value() reads of the age", None),
    ("cabi", "W1_json", "C ABI W1: of which formatting JSON text", None),
    ("cabi", "W5_read", "C ABI W5: of which range queries + atoll_results_json", None),
    ("cabi", "W5_json", "C ABI W5: of which host-side JSON scan/format", None),
]


def reference(workload, contender):
    """The contender whose time a ratio is taken against (None: no ratio)."""
    if contender == "raw":
        return None
    if contender == "python" and workload == "W1":
        return "pysqlite"
    return "raw"


def parse(path):
    times, checks, skip, comments = {}, {}, None, []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if line.startswith("#"):
                comments.append(line[1:].strip())
                continue
            parts = line.split()
            if parts[0] == "skip":
                skip = line[5:].strip() or "skipped"
            elif parts[0] == "check" and len(parts) >= 3:
                checks[parts[1]] = parts[2]
            elif len(parts) == 2:
                try:
                    times[parts[0]] = float(parts[1])
                except ValueError:
                    pass
    return times, checks, skip, comments


def fmt_time(s):
    if s is None:
        return "-"
    if s >= 100:
        return f"{s:.0f} s"
    if s >= 10:
        return f"{s:.1f} s"
    if s >= 1:
        return f"{s:.2f} s"
    return f"{s * 1000:.1f} ms" if s >= 0.01 else f"{s * 1000:.2f} ms"


def table(rows, header):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    line = lambda r: " | ".join(str(c).ljust(widths[i]) for i, c in enumerate(r)).rstrip()
    out = [line(header), "-+-".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: report.py OUTDIR N RUNS")
    outdir, n, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    samples = {}    # contender -> name -> [seconds per successful run]
    checks = {}     # contender -> name -> set of values
    status = {}     # contender -> "ok" | "skipped: ..." | "FAILED ..."
    headers = {}    # contender -> first comment line
    failed = False
    for key, _ in CONTENDERS:
        samples[key], checks[key] = {}, {}
        fails, skipped = [], None
        for r in range(1, runs + 1):
            out = os.path.join(outdir, f"{key}.{r}.out")
            rc_path = os.path.join(outdir, f"{key}.{r}.rc")
            if not os.path.exists(out):
                continue
            rc = int(open(rc_path).read().strip() or "1") if os.path.exists(rc_path) else 1
            times, chk, skip, comments = parse(out)
            if comments and key not in headers:
                headers[key] = comments[0]
            if skip:
                skipped = skip
                continue
            if rc != 0:
                fails.append(f"run {r} exit {rc}")
                continue
            for name, s in times.items():
                samples[key].setdefault(name, []).append(s)
            for name, v in chk.items():
                checks[key].setdefault(name, set()).add(v)
        if skipped:
            status[key] = f"skipped: {skipped}"
        elif fails:
            status[key] = "FAILED (" + ", ".join(fails) + ")"
            failed = True
        elif not samples[key]:
            status[key] = "not run"
        else:
            status[key] = "ok"

    med = {k: {name: statistics.median(v) for name, v in samples[k].items()} for k in samples}

    print(f"Atoll benchmark: N={n:,} objects, {runs} run(s) per contender, each in a fresh temp dir.")
    print("Cells: median wall time, then throughput relative to the reference (ref time / time;"
          " >1 is faster).")
    print("Reference: raw C; for Python W1, python sqlite3. OK/MISS: the issue's target for that cell.")
    print()
    header = ["workload"] + [title for _, title in CONTENDERS] + ["target"]
    rows, misses = [], []
    for w, wtitle in WORKLOADS:
        size = f"{n // 1_000_000}M" if n % 1_000_000 == 0 else (f"{n // 1000}k" if n % 1000 == 0 else str(n))
        tenth = f"{n // 10_000}k" if n % 10_000 == 0 else str(n // 10)
        row = [wtitle.replace("N/10", tenth, 1).replace("N", size, 1)]
        for key, title in CONTENDERS:
            t = med[key].get(w)
            if t is None:
                row.append("skipped" if status[key].startswith("skipped") else "-")
                continue
            cell = fmt_time(t)
            ref = reference(w, key)
            rt = med[ref].get(w) if ref else None
            if rt:
                ratio = rt / t
                cell += f" {ratio:.2f}x"
                goal = TARGETS.get((w, key))
                if goal is not None:
                    ok = ratio >= goal - 1e-9
                    cell += " OK" if ok else " MISS"
                    if not ok:
                        misses.append(f"{w} {title}: {ratio:.2f}x {('of ' + ('python sqlite3' if ref == 'pysqlite' else 'raw C'))}"
                                      f" throughput, target {goal:.2f}x"
                                      + (f" (time {t / rt:.2f}x raw's, target <= 1.2x)" if w in ("W2", "W3", "W4") else "")
                                      + (f" (time {t / rt:.2f}x raw's, target <= 1.5x)" if w.startswith("D") else ""))
            row.append(cell)
        row.append(TARGET_TEXT[w])
        rows.append(row)
    print(table(rows, header))
    print()
    if misses:
        print("Targets missed:")
        for m in misses:
            print("  - " + m)
    else:
        print("Targets missed: none (of those measured)")
    print()

    print("Details (medians):")
    for key, name, what, ref in DETAILS:
        t = med[key].get(name)
        if t is None:
            continue
        extra = ""
        if ref and med[ref[0]].get(ref[1]):
            extra = f"  ({med[ref[0]][ref[1]] / t:.2f}x raw W1 throughput)"
        print(f"  {what:<58} {fmt_time(t):>10}{extra}")
    print()

    print("Spread (min .. max over runs):")
    spread_rows = []
    for w, wtitle in WORKLOADS:
        row = [w]
        for key, _ in CONTENDERS:
            v = samples[key].get(w)
            row.append(f"{fmt_time(min(v))} .. {fmt_time(max(v))} ({len(v)})" if v else "-")
        spread_rows.append(row)
    print(table(spread_rows, ["workload"] + [t for _, t in CONTENDERS]))
    print()

    # Every contender must find the same answers (W5: the sum of ages after the update).
    names = sorted({name for k in checks for name in checks[k]})
    disagreements = []
    for name in names:
        values = {k: checks[k][name] for k in checks if name in checks[k]}
        distinct = set().union(*values.values())
        if len(distinct) > 1:
            disagreements.append(f"{name}: " + ", ".join(f"{k}={sorted(v)}" for k, v in values.items()))
    if disagreements:
        failed = True
        print("Checks DISAGREE:")
        for d in disagreements:
            print("  - " + d)
    else:
        print("Checks: all contenders found the same counts, name lengths and final sum of ages ("
              + ", ".join(f"{name}={next(iter(checks['raw'].get(name, {'?'})))}" for name in names) + ").")

    print()
    print("Contenders:")
    for key, title in CONTENDERS:
        print(f"  {title:<15} {status[key]}" + (f"  [{headers[key]}]" if key in headers else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
