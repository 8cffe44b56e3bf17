"""Prints the summary table of a `make stress` run.

Each suite appends one JSON object per line to the file named by ATOLL_STRESS_REPORT:
{"suite", "rounds", "operations", "faults", "lost", "crashes", "figures"}. This script reads
that file and prints one row per suite and a total; it exits non-zero when any suite lost data
or crashed, or when the file is missing or empty (a stress run that reported nothing proved
nothing).

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
        if not isinstance(row, dict) or "suite" not in row:
            raise SystemExit(f"{path}:{n}: a row needs at least \"suite\"")
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


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = Path(sys.argv[1])
    rows = load(path) if path.exists() else []
    if not rows:
        print(f"stress: no suite reported to {path}", file=sys.stderr)
        return 1
    print(table(rows))
    lost = sum(int(r.get("lost", 0) or 0) for r in rows)
    crashes = sum(int(r.get("crashes", 0) or 0) for r in rows)
    print(f"\ndata lost: {lost}, crashes: {crashes}")
    return 0 if lost == 0 and crashes == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
