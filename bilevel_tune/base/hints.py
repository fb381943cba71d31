"""One-line messages for a bad name: the value, a close match if there is one, and what is allowed."""

from __future__ import annotations

import difflib
from typing import Iterable


def did_you_mean(name: str, allowed: Iterable[str]) -> str:
    """' (did you mean 'x'?)' for the closest allowed name, or ''."""
    close = difflib.get_close_matches(str(name), list(allowed), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown_name(kind: str, name: str, allowed: Iterable[str], where: str = "") -> str:
    """unknown <kind> 'name'[ in <where>][ (did you mean …?)]; allowed: a, b, c"""
    allowed = list(allowed)
    place = f" in {where}" if where else ""
    return f"unknown {kind} {name!r}{place}{did_you_mean(name, allowed)}; allowed: {', '.join(allowed) or 'none'}"
