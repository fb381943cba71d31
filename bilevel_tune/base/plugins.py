"""A plug-in named by a built-in name or as `module:Class`: inner loops and worlds are found the same way."""

from __future__ import annotations

import importlib
from typing import Mapping


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
