"""The import graph of a package, read from its source (imports inside functions included), and the rules it must keep.

`imports(package_dir)` maps every module to the modules it imports —
ours by full name, third-party ones by their top two name parts
(`ray.rllib`, `ray.tune`, `pandas`, …). `from pkg import sub` counts as an
import of `pkg.sub` when that module exists. docs/architecture.md states
the rules `violations` checks.
"""

from __future__ import annotations

import ast
from pathlib import Path

NUMPY_CORE = ("bilevel_tune.base", "bilevel_tune.core", "bilevel_tune.worlds")  # and every module inside them
# The folders from the ground up (docs/architecture.md): a module imports only from its own folder or below.
LAYERS = (
    "base", "core", "worlds", "runtime", "inner", "appo", "study_data", "verdicts", "planning", "views", "tune_edge",
    "report", "cli",
)  # fmt: skip
ENTRY_POINTS = ("study", "summary", "reader", "es", "objective", "world")  # the root's entry points and re-exports: the top
REPORT_SIDE = ("pandas", "matplotlib")
RLLIB, TUNE = "ray.rllib", "ray.tune"


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(package_dir: Path) -> dict[str, set[str]]:
    package_dir = Path(package_dir)
    files = {module_name(package_dir, p): p for p in sorted(package_dir.rglob("*.py"))}
    graph = {}
    for name, path in files.items():
        targets = set()
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {_named(alias.name, files) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, is_package)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in files else _named(base if _ours(base, files) else full, files))
        graph[name] = targets - {name}
    return graph


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    parent = parts if is_package else parts[:-1]
    parent = parent[: len(parent) - (node.level - 1)]
    return ".".join(parent + ([node.module] if node.module else []))


def _ours(name: str, ours: dict) -> bool:
    return name.split(".")[0] in {m.split(".")[0] for m in ours}


def _named(name: str, ours: dict) -> str:
    """Ours: the module itself (or its package); theirs: the first two parts, e.g. ray.rllib."""
    if not _ours(name, ours):
        return ".".join(name.split(".")[:2])
    while name not in ours and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """Everything `start` imports, directly or through our modules."""
    seen, todo = set(), [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _uses(graph, module: str, third_party: str) -> bool:
    return any(t == third_party or t.startswith(third_party + ".") for t in reach(graph, module))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle among our modules (each found once, from its smallest member)."""
    found = []
    for start in sorted(graph):
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for target in sorted(graph.get(node, ())):
                if target == start:
                    found.append(path)
                elif target in graph and target > start and target not in path:
                    stack.append((target, [*path, target]))
    return found


def violations(graph: dict[str, set[str]], numpy_core=NUMPY_CORE) -> list[str]:
    out = []
    for module in (m for m in graph if m in numpy_core or m.startswith(tuple(f"{p}." for p in numpy_core))):
        if _uses(graph, module, "ray"):
            out.append(f"{module} is numpy core but imports Ray")
    for module in graph:
        report = any(_uses(graph, module, lib) for lib in REPORT_SIDE)
        if report:
            for inner in (m for m in reach(graph, module) | {module} if m in graph):
                if RLLIB in graph[inner]:
                    out.append(f"{module} imports pandas/matplotlib and, through {inner}, ray.rllib")
        if RLLIB in graph[module] and _uses(graph, module, TUNE):
            out.append(f"{module} imports ray.rllib and ray.tune")
    for circle in cycles(graph):
        out.append("import circle: " + " → ".join([*circle, circle[0]]))
    return out


def layer_of(module: str, layers=LAYERS) -> int:
    """A module's floor: its folder's place in `layers`; the package itself (its version) is the ground, the root's
    entry points and re-exports the top."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    if parts[1] in layers:
        return layers.index(parts[1])
    return len(layers)  # an entry point at the root (study.py, summary.py, …)


def upward(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import of ours that runs up: from a folder to one above it in `layers`."""
    package = next(iter(graph)).split(".")[0] if graph else ""
    return [
        f"{module} → {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if target.startswith(package) and layer_of(target, layers) > layer_of(module, layers)
    ]
