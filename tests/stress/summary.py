"""Prints the summary table of a `make stress` run.

Each suite appends one JSON object per line to the file named by ATOLL_STRESS_REPORT:
{"suite", "rounds", "operations", "faults", "lost", "crashes", "figures"}; the hostile suites
add one {"attack", "held", "skipped", "seconds"} line per test. This script reads that file and
prints one row per suite and a total, then the table of attacks; it exits non-zero when any
suite lost data or crashed, when an attack got through, or when the file is missing or empty (a
stress run that reported nothing proved nothing).

Usage: python summary.py REPORT.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict, List

COLUMNS = [("suite", "suite"), ("rounds", "rounds"), ("operations", "operations"),
           ("faults", "faults injected"), ("lost", "data lost"), ("crashes", "crashes"),
           ("figures", "figures")]


def load(path: Path) -> List[Dict[str, Any]]:
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise SystemExit(f"{path}:{n}: not a JSON line: {e}")
        if not isinstance(row, dict) or ("suite" not in row and "attack" not in row):
            raise SystemExit(f"{path}:{n}: a row needs at least \"suite\" or \"attack\"")
        rows.append(row)
    return rows


def table(rows: List[Dict[str, Any]]) -> str:
    cells = [[str(row.get(key, "")) for key, _ in COLUMNS] for row in rows]
    total = ["total"] + [str(sum(int(row.get(key, 0) or 0) for row in rows))
                         for key, _ in COLUMNS[1:-1]] + [""]
    header = [title for _, title in COLUMNS]
    widths = [max(len(r[i]) for r in [header, total] + cells) for i in range(len(COLUMNS))]

    def line(r: List[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule] + [line(r) for r in cells] + [rule, line(total)])


def attacks(rows: List[Dict[str, Any]]) -> str:
    """The hostile suites' attacks, one row per test (its parameters counted together): how
    many were tried and how many the server held against."""
    grouped: Dict[str, List[Dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["attack"].split("[")[0], []).append(row)
    cells = [[name, str(len(rs)), str(sum(1 for r in rs if r.get("held"))),
              str(sum(1 for r in rs if r.get("skipped"))), f"{sum(r.get('seconds', 0) for r in rs):.1f}"]
             for name, rs in grouped.items()]
    total = ["total", str(len(rows)), str(sum(1 for r in rows if r.get("held"))),
             str(sum(1 for r in rows if r.get("skipped"))), f"{sum(r.get('seconds', 0) for r in rows):.1f}"]
    header = ["attack (tests/hostile)", "tried", "held", "skipped", "seconds"]
    widths = [max(len(r[i]) for r in [header, total] + cells) for i in range(len(header))]

    def line(r: List[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule] + [line(r) for r in cells] + [rule, line(total)])


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = Path(sys.argv[1])
    rows = load(path) if path.exists() else []
    if not rows:
        print(f"stress: no suite reported to {path}", file=sys.stderr)
        return 1
    tried = [r for r in rows if "attack" in r]
    suites = [r for r in rows if "attack" not in r]
    print(table(suites))
    lost = sum(int(r.get("lost", 0) or 0) for r in suites)
    crashes = sum(int(r.get("crashes", 0) or 0) for r in suites)
    print(f"\ndata lost: {lost}, crashes: {crashes}")
    broken = [r["attack"] for r in tried if not r.get("held") and not r.get("skipped")]
    if tried:
        print("\n" + attacks(tried))
        print(f"\nattacks tried: {len(tried)}, held: {len(tried) - len(broken)}"
              + (f"; got through: {', '.join(broken)}" if broken else ""))
    return 0 if lost == 0 and crashes == 0 and not broken else 1


if __name__ == "__main__":
    sys.exit(main())
