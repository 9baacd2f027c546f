"""The throwaway subprocess that imports a plugin to validate it, split or combine.

Run as `python -m frost_core.plugin.worker`: one plain-CBOR request on stdin, one reply on
stdout (`{"ok": True, ...}` or `{"ok": False, "error": reason}`). The plugin's own prints go
to stderr so they cannot corrupt the reply; a phase mark on stderr before each plugin call
lets the parent say which call hung.
"""

from __future__ import annotations

import atexit
import io
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from frost_core.api.errors import PluginError
from frost_core.plugin.api import API_VERSION, Done, Output, Plugin, WorkUnit, parse_params, unit_files
from frost_core.plugin.gang import GangPlugin, MemberCheckpoint, check_member_memory, check_members, check_superstep
from frost_core.plugin.limits import MAX_RESULT_BYTES
from frost_core.plugin.plain import decode_pieces, decode_plain, encode_pieces, encode_plain
from frost_core.plugin.loader import describe_exception, load_plugin_file

PHASE_MARK = "frost-plugin-phase: "
"""Written to stderr before each plugin call, so that on a timeout the parent can name the call."""


def main() -> int:
    """Answer one request; the exit status is 0 whenever a reply was written."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)  # from here on, anything the plugin prints lands on stderr
    try:
        request = decode_plain(sys.stdin.buffer.read(), "plugin request")
        if not isinstance(request, dict):
            raise PluginError("the plugin request must be a map")
        reply = _handle(request)
        data = encode_plain(reply, "the plugin's reply", MAX_RESULT_BYTES)
    except PluginError as exc:
        data = encode_plain({"ok": False, "error": exc.message}, "error reply", MAX_RESULT_BYTES)
    with os.fdopen(reply_fd, "wb") as out:
        out.write(data)
    return 0


def _handle(request: dict) -> dict:
    """The reply to one request; failures before the plugin is known raise PluginError."""
    op = request.get("op")
    path = request.get("path")
    if not isinstance(path, str):
        raise PluginError("the plugin request has no path")
    plugin = _call("import", load_plugin_file, path)
    if op == "validate":
        try:
            with tempfile.TemporaryDirectory(prefix="frost-smoke-") as scratch, unit_files(SmokeFiles(Path(scratch))):
                return {"ok": True, **(validate_gang(plugin) if isinstance(plugin, GangPlugin) else validate(plugin))}
        except PluginError as exc:  # the plugin's name lets the list show which plugin is broken
            return {"ok": False, "error": exc.message, "name": plugin.name}
    params = parse_params(plugin, request.get("params") or {})
    if op == "members" and isinstance(plugin, GangPlugin):
        return {"ok": True, "members": check_members(_call("members", plugin.members, params)),
                "memory_bytes": check_member_memory(_call("member_memory", plugin.member_memory, params))}
    if op in ("split", "members") and isinstance(plugin, GangPlugin) == (op == "split"):
        kind = "a gang plugin: its assignments run as members, not units" if op == "split" else "not a gang plugin"
        raise PluginError(f"{plugin.name} is {kind}")
    if op == "split":
        units = [unit.to_plain() for unit in check_units(_call("split", plugin.split, params))]
        return {"ok": True, "units": encode_pieces(units, "the split's units", MAX_RESULT_BYTES)}
    if op == "combine":
        results = decode_pieces(request.get("results"), "a combine request's results")
        output = _call("combine", plugin.combine, params, results)
        if not isinstance(output, Output):
            raise PluginError(f"combine returned a {type(output).__name__}, not an Output")
        return {"ok": True, "data": output.data, "media_type": output.media_type, "filename": output.filename}
    raise PluginError(f"unknown plugin request {op!r}")


def validate(plugin: Plugin) -> dict:
    """Describe the plugin after a smoke run: default parameters, split, start, one step.

    Each stage is checked the way the runtime will use it (state round-tripped through CBOR),
    so a plugin that breaks the API is listed as broken before anyone submits to it.
    """
    try:
        params = parse_params(plugin, {})
    except PluginError as exc:
        raise PluginError(f"the default parameters are rejected: {exc.message}") from None
    units = check_units(_call("split", plugin.split, params))
    state = _round_trip(_call("start", plugin.start, units[0]), "the state returned by start")
    _check_progress(_call("progress", plugin.progress, state))
    after = _call("step", plugin.step, state)
    if isinstance(after, Done):
        encode_plain(after.result, "the result returned by step", MAX_RESULT_BYTES)
    else:
        _check_progress(_call("progress", plugin.progress, _round_trip(after, "the state returned by step")))
    return describe(plugin)


def validate_gang(plugin: GangPlugin) -> dict:
    """Describe a gang plugin after a smoke run: default parameters, members, rank 0's start and first superstep."""
    try:
        params = parse_params(plugin, {})
    except PluginError as exc:
        raise PluginError(f"the default parameters are rejected: {exc.message}") from None
    size = check_members(_call("members", plugin.members, params))
    check_member_memory(_call("member_memory", plugin.member_memory, params))
    before = MemberCheckpoint(0, 0, _call("start", plugin.start, params, 0, size), {})
    state = MemberCheckpoint.from_bytes(before.to_bytes(), size).state
    after = check_superstep(_call("step", plugin.step, state, 0, size, {}), 0, size, 0)
    if after.done:
        encode_plain(_call("finish", plugin.finish, after.state, 0, size), "the result returned by finish", MAX_RESULT_BYTES)
    else:
        MemberCheckpoint(0, 1, after.state, {}).to_bytes()
    return {**describe(plugin), "gang": True}


def describe(plugin: Plugin | GangPlugin) -> dict:
    """What the registry keeps of a plugin that passed its smoke run."""
    return {
        "api": API_VERSION,
        "name": plugin.name,
        "version": plugin.version,
        "description": plugin.description,
        "params": [param.to_plain() for param in plugin.params],
    }


class SmokeFiles:
    """The smoke run has no assignment, so no real input files: every name reads as an empty file."""

    def __init__(self, output_dir: Path) -> None:
        self.output_dir = output_dir

    def open_input(self, name: str) -> BinaryIO:
        return io.BytesIO(b"")


def check_units(units: object) -> list[WorkUnit]:
    """A split must give a non-empty list of WorkUnit numbered 0, 1, 2, ... in order."""
    if not isinstance(units, list) or not units:
        raise PluginError("split must return a non-empty list of WorkUnit")
    for position, unit in enumerate(units):
        if not isinstance(unit, WorkUnit):
            raise PluginError(f"split returned a {type(unit).__name__} at position {position}, not a WorkUnit")
        if unit.index != position:
            raise PluginError(f"split returned unit index {unit.index} at position {position}; number units 0, 1, 2, ...")
    return units


def _call(phase: str, function: Callable[..., Any], *args: object) -> Any:
    print(f"{PHASE_MARK}{phase}", file=sys.stderr, flush=True)
    try:
        return function(*args)
    except PluginError as exc:
        if phase == "import":
            raise
        raise PluginError(f"{phase}: {exc.message}") from None
    except (Exception, SystemExit) as exc:  # plugin code may raise anything; report it as its fault
        raise PluginError(f"{phase} raised {describe_exception(exc)}") from None


def _round_trip(state: object, what: str) -> object:
    if isinstance(state, Done):
        raise PluginError(f"{what} is a Done; only step may finish a unit")
    return decode_plain(encode_plain(state, what), what)


def _check_progress(value: object) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not (math.isfinite(value) and 0 <= value <= 1):
        raise PluginError(f"progress must return a number in [0, 1], not {value!r}")


def _exit_now(status: int) -> None:
    """End the process once its exit handlers ran (a plugin's temporary folders go) and stdout and stderr are
    flushed, without the interpreter's tear-down: the reply is written, and tearing down the modules took
    13-34 ms that its split or combine waited for."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


if __name__ == "__main__":
    _exit_now(main())
