"""Run a plugin's split, combine or validation in a throwaway subprocess, never in the node.

Plugin code may loop, crash, print or exhaust memory; it does so in a child process with its
own session that we kill as a group at the deadline. Requests and replies are plain CBOR over
the child's stdin and stdout (see `frost_core.plugin.worker`); any failure becomes a
PluginError carrying the reason and the tail of the child's stderr.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import trio

from frost_core.api.errors import PluginError
from frost_core.plugin.api import Output, WorkUnit
from frost_core.plugin.limits import MAX_RESULT_BYTES
from frost_core.plugin.plain import decode_pieces, decode_plain, encode_pieces, encode_plain
from frost_core.plugin.spare import SpareWorker, kill_worker, start_worker
from frost_core.plugin.worker import PHASE_MARK

SPLIT_TIMEOUT = 60.0
COMBINE_TIMEOUT = 300.0
STDERR_TAIL = 4000


class PluginFile(Protocol):
    """What a call needs of a plugin: its name for messages and the file a worker loads (a registry's PluginInfo)."""

    @property
    def name(self) -> str: ...

    @property
    def path(self) -> str: ...


async def split_units(info: PluginFile, params: Mapping[str, object], *, timeout: float = SPLIT_TIMEOUT,
                      spare: SpareWorker | None = None) -> list[WorkUnit]:
    """Cut an assignment into work units by running the plugin's `split` in a subprocess (`spare`'s, if one waits)."""
    reply = await run_worker({"op": "split", "path": info.path, "params": dict(params)}, timeout=timeout,
                             label=info.name, spare=spare)

    def units() -> list[WorkUnit]:   # (100,000 units: 0.8 s, off the event loop)
        return decode_pieces(reply.get("units"), f"{info.name}'s split", WorkUnit.from_plain)

    return await trio.to_thread.run_sync(units)


@dataclass(frozen=True)
class GangDemand:
    """What a gang assignment asks of the cluster: `members` hosts, each with `memory_bytes` free for its member."""

    members: int
    memory_bytes: int


async def gang_demand(info: PluginFile, params: Mapping[str, object], *, timeout: float = SPLIT_TIMEOUT) -> GangDemand:
    """How many members a gang plugin's assignment with `params` has and the memory each may use, asked of
    the plugin in a subprocess."""
    reply = await run_worker({"op": "members", "path": info.path, "params": dict(params)}, timeout=timeout, label=info.name)
    return GangDemand(reply["members"], reply["memory_bytes"])


async def combine_output(
    info: PluginFile, params: Mapping[str, object], results: list, *, timeout: float = COMBINE_TIMEOUT,
    spare: SpareWorker | None = None,
) -> Output:
    """Merge unit results (in unit index order) by running the plugin's `combine` in a subprocess (`spare`'s, if
    one waits)."""
    pieces = await trio.to_thread.run_sync(encode_pieces, list(results), "the unit results", MAX_RESULT_BYTES)
    request = {"op": "combine", "path": info.path, "params": dict(params), "results": pieces}
    reply = await run_worker(request, timeout=timeout, label=info.name, spare=spare)
    try:
        return Output(reply["data"], reply["media_type"], reply["filename"])
    except KeyError as exc:
        raise PluginError(f"plugin {info.name!r}: the worker's output lacks {exc}") from None


async def run_worker(request: dict, *, timeout: float, label: str, spare: SpareWorker | None = None) -> dict:
    """Like `ask_worker`, but a plugin's own failure raises PluginError with its reason too."""
    reply = await ask_worker(request, timeout=timeout, label=label, spare=spare)
    if not reply["ok"]:
        raise PluginError(str(reply.get("error")))
    return reply


async def ask_worker(request: dict, *, timeout: float, label: str, spare: SpareWorker | None = None) -> dict:
    """Send one request to a fresh worker process (`spare`'s waiting one, if there is one) and return its reply
    map (`ok` says how the plugin fared). The request is encoded and the reply decoded in a worker thread: a
    100,000-unit split's reply took 0.5 s to decode, a combine's request of as many results as long to encode.

    Raises PluginError when the deadline passed (naming the plugin call that hung) or the
    worker died without a reply (with its exit status and stderr tail).
    """
    payload = await trio.to_thread.run_sync(encode_plain, request, "plugin request", MAX_RESULT_BYTES)
    process = (await spare.take() if spare is not None else None) or await start_worker()
    stdout = bytearray()
    stderr = bytearray()
    phase = ["starting the worker"]
    try:
        with trio.move_on_after(timeout) as deadline:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_feed, process.stdin, payload)
                nursery.start_soon(_collect_reply, process, stdout)
                nursery.start_soon(_collect_tail, process.stderr, stderr, phase)
                nursery.start_soon(_reap, process)
    finally:
        kill_worker(process)
        with trio.CancelScope(shield=True):
            await process.wait()
    errors = stderr.decode("utf-8", "replace")
    if deadline.cancelled_caught:
        raise PluginError(f"plugin {label!r}: {phase[0]} did not finish within {timeout:g} s{_tail(errors)}")
    if len(stdout) > MAX_RESULT_BYTES:
        raise PluginError(f"plugin {label!r}: the reply exceeds {MAX_RESULT_BYTES} bytes")
    if not stdout:
        raise PluginError(f"plugin {label!r}: the worker exited with status {process.returncode} and no reply{_tail(errors)}")
    reply = await trio.to_thread.run_sync(decode_plain, bytes(stdout), "plugin worker reply")
    if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
        raise PluginError(f"plugin {label!r}: the worker sent a malformed reply")
    return reply


async def _feed(stream: trio.abc.SendStream | None, payload: bytes) -> None:
    assert stream is not None
    async with stream:
        try:
            await stream.send_all(payload)
        except trio.BrokenResourceError:
            pass  # the worker died before reading; its exit status tells why


async def _collect_reply(process: trio.Process, into: bytearray) -> None:
    """Read the reply; a worker that sends more than any reply may hold is killed."""
    assert process.stdout is not None
    async with process.stdout:
        while chunk := await process.stdout.receive_some(65536):
            into += chunk
            if len(into) > MAX_RESULT_BYTES:
                kill_worker(process)
                return


async def _collect_tail(stream: trio.abc.ReceiveStream | None, into: bytearray, phase: list[str]) -> None:
    """Read stderr to its end, keeping its tail and the last phase mark (a chatty plugin may
    push the mark out of the tail)."""
    assert stream is not None
    mark = PHASE_MARK.encode()
    async with stream:
        while chunk := await stream.receive_some(65536):
            into += chunk
            start = into.rfind(mark)
            end = into.find(b"\n", start)
            if start >= 0 and end >= 0 and (start == 0 or into[start - 1] == 10):
                phase[:] = [into[start + len(mark) : end].decode("utf-8", "replace")]
            if len(into) > 4 * STDERR_TAIL:
                del into[: len(into) - STDERR_TAIL]


async def _reap(process: trio.Process) -> None:
    """Once the worker exits, kill what it left behind: orphans holding our pipes open."""
    await process.wait()
    kill_worker(process)


def _tail(errors: str) -> str:
    lines = [line for line in errors.splitlines() if not line.startswith(PHASE_MARK)]
    text = "\n".join(lines).strip()[-STDERR_TAIL:]
    return f"\n--- stderr ---\n{text}" if text else ""

