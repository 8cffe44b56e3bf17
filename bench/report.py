#!/usr/bin/env python3
"""Aggregates the contenders' output into the benchmark table (Python 3 standard library only).

    report.py OUTDIR N RUNS

OUTDIR holds, for each contender C and run R (1-based), `C.R.out` (its stdout: "<name> <seconds>",
"check <name> <value>", "skip <reason>", "#" comments) and `C.R.rc` (its exit status). Prints the
table of medians with throughput ratios and targets, the details, the spread of the runs and
whether the contenders' check values agree. Exits 1 when a contender failed or checks disagree.

The notification benchmark (`notify.R.out`, bench/notify.c) has its own table: percentiles of
latencies ("<name>_p50 <seconds>"..., "samples <name> <n>") with their targets, and the file and
change-log sizes of its long write workload ("growth <commits> <file> <wal> <log entries>").
"""

import os
import statistics
import sys

# (key, column title); the order of the table's columns.
CONTENDERS = [
    ("raw", "raw C"),
    ("swift", "Swift"),
    ("typed", "typed"),
    ("cabi", "C ABI"),
    ("python", "Python"),
    ("pysqlite", "python sqlite3"),
]

# How the misses name a reference.
REFERENCE_TITLES = {"raw": "raw C", "pysqlite": "python sqlite3", "swift": "Swift (dynamic API)"}

WORKLOADS = [
    ("W1", "W1 insert N, 1 txn"),
    ("W2", "W2 count age==42 x100"),
    ("W3", "W3 count owner&age>50 x10"),
    ("W4", "W4 100k pk reads of name"),
    ("W5", "W5 age+1 each, 1 txn"),
    ("I1", "I1 iterate N, read 2 props"),
    ("D1", "D1 insert N/10 owners x 10 list items"),
    ("D2", "D2 count owner.name==k x100 (link)"),
    ("D3", "D3 count backlinks>=2 x10"),
    ("D4", "D4 count list contains 7 x10"),
]

# Targets from the issues: (workload, contender) -> minimum throughput ratio against the
# reference (see reference()).
# W1/W5: Swift >= 0.8x raw, C ABI >= 0.6x raw, typed >= 0.6x raw; Python W1 >= 1.0x python sqlite3.
# W2-W4: Swift and C ABI within 1.2x of raw SQLite's best time, i.e. ratio >= 1/1.2.
# I1: typed within 2x of the dynamic Swift API's time, i.e. ratio >= 0.5.
TARGETS = {
    ("W1", "swift"): 0.8, ("W1", "cabi"): 0.6, ("W1", "typed"): 0.6, ("W1", "python"): 1.0,
    ("W5", "swift"): 0.8, ("W5", "cabi"): 0.6, ("W5", "typed"): 0.6,
    ("I1", "typed"): 0.5,
}
for _w in ("W2", "W3", "W4"):
    TARGETS[(_w, "swift")] = 1 / 1.2
    TARGETS[(_w, "cabi")] = 1 / 1.2
# The data-model workloads (Swift only): within 1.5x of the hand-written SQL's time.
for _w in ("D1", "D2", "D3", "D4"):
    TARGETS[(_w, "swift")] = 1 / 1.5

TARGET_TEXT = {
    "W1": "Swift>=0.8x C-ABI,typed>=0.6x Py>=1.0x sqlite3",
    "W2": "Swift,C-ABI time<=1.2x raw",
    "W3": "Swift,C-ABI time<=1.2x raw",
    "W4": "Swift,C-ABI time<=1.2x raw",
    "W5": "Swift>=0.8x C-ABI,typed>=0.6x",
    "I1": "typed>=0.5x Swift (time<=2x)",
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


# The notification benchmark (bench/notify.c): (figure, what, {percentile: target seconds}).
NOTIFY_KEY = "notify"
NOTIFY_FIGURES = [
    ("L_thread", "commit -> callback, other handle, same process (thread delivery)", {"p50": 0.001, "p99": 0.005}),
    ("L_process", "commit in another process -> callback (thread delivery)", {"p50": 0.010}),
    ("DIFF", "diff of {diff_n} results, 10 changed: delivery start -> callback", {"p50": 0.020}),
    ("DIFF_call", "  the same, the whole atoll_realm_deliver_notifications call", {}),
    ("DIFF_sorted", "  the same results sorted by name (string sort)", {}),
    ("OBS", "{observers} results observers, one commit -> all callbacks ran", {"p50": 0.050}),
    ("OBS_sorted", "  the same queries sorted by age", {}),
    ("G_commit", "one small commit during the growth workload (observer attached)", {}),
]
NOTIFY_PERCENTILES = ["p50", "p90", "p99", "max"]
# The growth workload is "flat" when the change log stays bounded (pruned every 64 commits to the
# newest 64, plus what a lagging observer holds) and the database file does not grow over its
# second half. The -wal file is shown beside it: SQLite reuses it from the start after a
# checkpoint, but never shrinks it (its size is the high-water mark), and it grows while a
# handle's snapshot is older than the frames a checkpoint would need to pass.
GROWTH_MAX_LOG = 256
GROWTH_MAX_SECOND_HALF = 1.25


def parse_notify(path):
    """The notify program's output: figures, sample counts, growth points, comments."""
    figures, counts, growth, comments = {}, {}, [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                comments.append(line[1:].strip())
                continue
            parts = line.split()
            try:
                if len(parts) == 2:
                    figures[parts[0]] = float(parts[1])
                elif len(parts) == 3 and parts[0] == "samples":
                    counts[parts[1]] = int(parts[2])
                elif len(parts) == 5 and parts[0] == "growth":
                    growth.append(tuple(int(x) for x in parts[1:]))
            except ValueError:
                pass
    return figures, counts, growth, comments


def fmt_bytes(b):
    if b >= 1 << 20:
        return f"{b / (1 << 20):.1f} MiB"
    if b >= 1 << 10:
        return f"{b / (1 << 10):.0f} KiB"
    return f"{b} B"


def notifications(outdir, runs):
    """Prints the Notifications section; returns (status, whether it failed)."""
    figures, counts, growths, comments, fails = {}, {}, [], None, []
    for r in range(1, runs + 1):
        out = os.path.join(outdir, f"{NOTIFY_KEY}.{r}.out")
        if not os.path.exists(out):
            continue
        rc_path = os.path.join(outdir, f"{NOTIFY_KEY}.{r}.rc")
        rc = int(open(rc_path).read().strip() or "1") if os.path.exists(rc_path) else 1
        if rc != 0:
            fails.append(f"run {r} exit {rc}")
            continue
        f, c, g, com = parse_notify(out)
        for name, v in f.items():
            figures.setdefault(name, []).append(v)
        for name, v in c.items():
            counts.setdefault(name, []).append(v)
        if g:
            growths.append(g)
        if comments is None:
            comments = com
    if not figures and not fails:
        return "not run", False
    print()
    if not figures:
        print("Notifications: no successful run (" + ", ".join(fails) + ").")
        return "FAILED (" + ", ".join(fails) + ")", True
    done = len(growths) or len(figures.get("L_thread_p50", []))
    print(f"Notifications (bench/notify.c, C ABI): each cell the median over {done} run(s) of that"
          " percentile of the run's samples.")
    med = {name: statistics.median(v) for name, v in figures.items()}
    diff_n = next((c.split()[1] for c in comments or [] if c.startswith("DIFF:") and "objects" in c), "100000")
    observers = next((c.split()[1] for c in comments or [] if c.startswith("OBS:")), "1000")  # "OBS: 1000 ..."
    try:
        diff_n = f"{int(diff_n):,}"
        observers = f"{int(observers):,}"
    except ValueError:
        pass
    rows, misses = [], []
    for name, what, targets in NOTIFY_FIGURES:
        if not any(f"{name}_{p}" in med for p in NOTIFY_PERCENTILES) and name not in med:
            continue
        row = [what.format(diff_n=diff_n, observers=observers)]
        if name in med:  # a single figure (G_commit)
            row += [fmt_time(med[name]), "", "", ""]
        else:
            row += [fmt_time(med.get(f"{name}_{p}")) for p in NOTIFY_PERCENTILES]
        n_samples = counts.get(name)
        row.append(str(int(statistics.median(n_samples))) if n_samples else "")
        verdicts = []
        for p, goal in targets.items():
            got = med.get(f"{name}_{p}")
            if got is None:
                continue
            ok = got < goal
            verdicts.append(f"{p} < {fmt_time(goal)} {'OK' if ok else 'MISS'}")
            if not ok:
                misses.append(f"{name} {p}: {fmt_time(got)}, target < {fmt_time(goal)}")
        row.append(", ".join(verdicts))
        rows.append(row)
    print(table(rows, ["measure"] + NOTIFY_PERCENTILES + ["samples", "target"]))

    if growths:
        g = growths[0]
        print()
        print(f"Growth (run 1): {g[-1][0]:,} commits of one object each, an observer on another handle.")
        print(table([[f"{c:,}", fmt_bytes(fb), fmt_bytes(wb), fmt_bytes(fb + wb), str(le)] for c, fb, wb, le in g],
                    ["commits", "file", "wal", "file+wal", "log entries"]))
        verdicts, wal_ratios = [], []
        for run, points in enumerate(growths, 1):
            max_log = max(p[3] for p in points)
            mid = points[(len(points) - 1) // 2]
            end = points[-1]
            ratio = end[1] / max(1, mid[1])
            wal_ratios.append(end[2] / max(1, mid[2]))
            ok = max_log <= GROWTH_MAX_LOG and ratio <= GROWTH_MAX_SECOND_HALF
            verdicts.append(ok)
            if not ok:
                misses.append(f"growth run {run}: at most {max_log} log entries (target <= {GROWTH_MAX_LOG}),"
                              f" file x{ratio:.2f} over the second half (target <= {GROWTH_MAX_SECOND_HALF})")
        print(f"Target: flat (log entries <= {GROWTH_MAX_LOG} at every point, file at the end <="
              f" {GROWTH_MAX_SECOND_HALF}x the midpoint's): "
              + ("OK" if all(verdicts) else "MISS") + f" ({sum(verdicts)} of {len(verdicts)} runs)."
              + f" The wal at the end: x{statistics.median(wal_ratios):.2f} the midpoint's (median over runs;"
              " not part of the target, see bench/README.md).")
    print()
    if misses:
        print("Notification targets missed:")
        for m in misses:
            print("  - " + m)
    else:
        print("Notification targets missed: none (of those measured)")
    if comments:
        print("Notes (run 1):")
        for c in comments:
            print("  " + c)
    if fails:
        return "FAILED (" + ", ".join(fails) + ")", True
    return "ok", False


def reference(workload, contender):
    """The contender whose time a ratio is taken against (None: no ratio)."""
    if workload == "I1":  # raw C does not run it: the typed API against the dynamic one
        return "swift" if contender == "typed" else None
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

    if all(status[k] == "not run" for k, _ in CONTENDERS):
        print(f"Atoll benchmark: {runs} run(s), each in a fresh temp dir; no workload contender ran.")
    else:
        failed = main_tables(n, runs, samples, checks, status, headers, med) or failed

    notify_status, notify_failed = notifications(outdir, runs)
    failed = failed or notify_failed

    print()
    print("Contenders:")
    for key, title in CONTENDERS:
        print(f"  {title:<15} {status[key]}" + (f"  [{headers[key]}]" if key in headers else ""))
    print(f"  {'notifications':<15} {notify_status}")
    return 1 if failed else 0


def main_tables(n, runs, samples, checks, status, headers, med):
    """Prints the workload table, details, spread and checks; returns whether checks disagree."""
    failed = False
    print(f"Atoll benchmark: N={n:,} objects, {runs} run(s) per contender, each in a fresh temp dir.")
    print("Cells: median wall time, then throughput relative to the reference (ref time / time;"
          " >1 is faster).")
    print("Reference: raw C; for Python W1, python sqlite3; for typed I1, Swift's (the dynamic API's) I1."
          " OK/MISS: the project's target for that cell.")
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
                        misses.append(f"{w} {title}: {ratio:.2f}x of {REFERENCE_TITLES[ref]}"
                                      f" throughput, target {goal:.2f}x"
                                      + (f" (time {t / rt:.2f}x Swift's, target <= 2x)" if w == "I1" else "")
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

    # The database right after W1 (page count x page size), against raw SQLite's.
    sizes = [(key, title, med[key].get("W1_file")) for key, title in CONTENDERS if med[key].get("W1_file")]
    raw_size = med["raw"].get("W1_file")
    if sizes:
        print("File after W1 (medians; target: Atoll <= 1.25x raw SQLite's):")
        for key, title, b in sizes:
            ratio = f"  {b / raw_size:.2f}x raw" if raw_size else ""
            goal = ""
            if raw_size and key not in ("raw", "pysqlite"):
                goal = " OK" if b / raw_size <= 1.25 + 1e-9 else " MISS"
            print(f"  {title:<15} {b / 1e6:8.1f} MB{ratio}{goal}")
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
              + ", ".join(f"{name}={next(iter(next((checks[k][name] for k in checks if name in checks[k]), {'?'})))}"
                          for name in names) + ").")

    return failed


if __name__ == "__main__":
    sys.exit(main())
