"""The per-trial record: `generations.jsonl`, one JSON line per generation plus one final line.

It is the authoritative record of a trial (Tune's own files are a view).
A retried trial may append a generation again; `read_records` keeps the
last line per generation, so readers see no gap and no duplicate.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

GENERATIONS_FILE = "generations.jsonl"
KIND_GENERATION = "generation"
KIND_FINAL = "final"


def json_safe(value):
    """JSON-safe: tuples to lists, numpy to Python, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist"):
        return json_safe(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one line and flush it to disk: a killed trial loses at most the line being written."""
    line = json.dumps(json_safe(record), allow_nan=False)
    with open(path, "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_records(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(generations sorted and deduplicated — last write wins —, the final record or None)."""
    by_generation: dict[int, dict[str, Any]] = {}
    final = None
    if not Path(path).exists():
        return [], None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill mid-write
                continue
            if record.get("kind") == KIND_FINAL:
                final = record
            else:
                by_generation[int(record["generation"])] = record
    return [by_generation[g] for g in sorted(by_generation)], final
