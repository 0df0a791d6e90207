"""JSON from outside the process, read alike on every Python: nesting is bounded.

Python 3.11's parser raises RecursionError about 1,000 levels down; 3.12's parses documents nested
thousands deep and leaves the recursion to whoever walks the result. Every reader of an untrusted
document (parameter literals, record metadata, configurations, public models, archive headers)
goes through :func:`loads`, so a hostile document is the same ``ValueError`` on both, which each
reader turns into its own error type.
"""
from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64  # no document of the project nests past 4 levels


def loads(text: str | bytes | bytearray, *, max_depth: int = MAX_DEPTH, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``; a ValueError (malformed JSON, or arrays and objects nested
    deeper than ``max_depth``)."""
    try:
        value = json.loads(text, **kwargs)
    except RecursionError:
        raise ValueError(f"JSON nested deeper than {max_depth} levels") from None
    _check_depth(value, max_depth)
    return value


def _check_depth(value: Any, max_depth: int) -> None:
    """Walks the containers with an explicit stack (no recursion to exhaust)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        containers = [child for child in children if isinstance(child, (dict, list))]
        if containers and depth >= max_depth:
            raise ValueError(f"JSON nested deeper than {max_depth} levels")
        pending.extend((child, depth + 1) for child in containers)
