"""How big and how named anything a plugin hands the runtime may be: states, results, nesting, file names.

The cluster and the guest check the same limits as the author API, so they live below both.
"""

from __future__ import annotations

from frost_core.api.errors import PluginError

MAX_STATE_BYTES = 256 * 1024 * 1024
"""A unit's state travels with every checkpoint and migration, so small is fast (FROST's were ~500 KB);
the cap leaves room for the 100 MB states of real simulations. It travels in 256 KiB chunks."""
MAX_RESULT_BYTES = 256 * 1024 * 1024
MAX_DEPTH = 64
MAX_MEMBERS = 64
"""The most members a gang assignment may have: each runs on a host of its own."""
MEMBER_MEMORY = 256 * 1024 * 1024
"""The memory a gang member's guest may use (its cgroup's limit) when its plugin does not declare it."""
MAX_OUTBOX_BYTES = 16 * 1024 * 1024
"""What one gang member may send in one superstep, encoded: it crosses the network at every barrier
(a heat-diffusion halo is a few KB)."""
MAX_FILE_NAME_BYTES = 255
MAX_OUTPUT_NAME_BYTES = 200
"""An assignment's combined output is exported as <assignment id>-<name>, beside a temporary twin a dot and
".partial" longer: both must fit the 255 bytes a file name may have."""


def check_file_name(name: object, what: str = "file", limit: int = MAX_FILE_NAME_BYTES) -> str:
    """Return `name` if it is one plain file name, the same on every host; PluginError if not.

    No folders, no leading dot (the runtime's own temporary files start with one), no control
    characters, at most `limit` bytes of UTF-8.
    """
    if (
        not isinstance(name, str) or not name or name.startswith(".") or "/" in name or "\\" in name
        or any(ord(c) < 32 or ord(c) == 127 for c in name) or len(name.encode(errors="replace")) > limit
    ):
        raise PluginError(f"{what} name {name!r} must be a plain file name (no folders, no leading dot, "
                          f"at most {limit} bytes)")
    return name
