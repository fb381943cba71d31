"""A plug-in named by a built-in name or as `module:Class`: inner loops and worlds are found the same way."""

from __future__ import annotations

import importlib
import sysconfig
import traceback
from pathlib import Path
from typing import Mapping

PACKAGE = Path(__file__).resolve().parent.parent  # bilevel_tune/
LIBRARIES = {Path(sysconfig.get_paths()[key]).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")}


def import_class(
    spec: str, builtins: Mapping[str, str], error: type[Exception], what: str = "", form: str = ""
) -> type:
    """The class a spec names: a built-in name's path, or the spec itself as `module:Class`.

    `error` carries the one line that names what is wrong: an unknown name (with the names allowed) or an import
    that fails; `what` prefixes the spec in that line ("world "), `form` is how a path is spelled there.
    """
    path = builtins.get(spec, spec) if isinstance(spec, str) else spec
    if not isinstance(path, str) or path.count(":") != 1:
        raise error(f"{what}{spec!r} is unknown; allowed: {', '.join(builtins)}, or {form or 'module:Class'}")
    module_name, _, class_name = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as err:
        raise error(f"{what}{spec!r} cannot be imported ({err})") from None


def in_users_code(err: BaseException) -> str | None:
    """Where an exception was raised in a user's own module (a world or a loop named as `module:Class`), as one line
    naming the file, line and function: the innermost frame outside this package, the standard library and the
    installed packages; None when it was raised in none (a fault of this package or of a library: a traceback)."""
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        path = Path(frame.filename).resolve()
        if frame.filename.startswith("<") or path.is_relative_to(PACKAGE):
            continue
        if any(path.is_relative_to(library) for library in LIBRARIES):
            continue
        message = str(err).splitlines()[0] if str(err) else ""
        return f"{type(err).__name__} in your code, {path.name}:{frame.lineno} ({frame.name}): {message}"
    return None
