"""What every reply's ``from_json`` shares."""

from __future__ import annotations

from typing import Any, Dict, Optional

Json = Dict[str, Any]


def opt_int(v: Any) -> Optional[int]:
    """``v`` when it is an integer (not a bool), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) else None
