"""Guest tasks: each unit in its own subprocess at the lowest priority, and its trio supervisor.

Names load lazily so that `python -m frost_core.guest.child` starts without trio or psutil and
can lower its priority before doing anything else.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "GuestSupervisor": "frost_core.guest.supervisor",
    "GuestTask": "frost_core.guest.views",
    "InputFile": "frost_core.guest.views",
    "GuestSettings": "frost_core.guest.views",
    "GuestEvent": "frost_core.guest.views",
    "GuestFigures": "frost_core.guest.views",
    "Completed": "frost_core.guest.views",
    "Failed": "frost_core.guest.views",
    "Evicted": "frost_core.guest.views",
    "Stopped": "frost_core.guest.views",
    "Outcome": "frost_core.guest.views",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
