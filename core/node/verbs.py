"""What each control-socket verb means: a command for the node, or a slice of its snapshot as plain data."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from frost_core.api.commands import (
    AddPlugin, CancelAssignment, EvictGuests, FinishThenPause, MoveTask, PauseHosting, ResumeHosting,
    SubmitAssignment,
)
from frost_core.api.errors import FrostError, ProtocolError
from frost_core.policies.intents import parse_until
from frost_core.master.results import save_files, write_atomically
from frost_core.node.views import assignment_view

if TYPE_CHECKING:
    from frost_core.node.wiring import Node


async def answer_control(node: Node, verb: str, args: dict[str, Any]) -> Any:
    handler = _VERBS.get(verb)
    if handler is None:
        raise ProtocolError(f"unknown control verb {verb!r}")
    return await handler(node, args)


def _text(args: dict[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = args.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value:
        raise ProtocolError(f"control argument {key!r} must be a non-empty string")
    return value


async def _status(node: Node, args: dict[str, Any]) -> dict[str, Any]:
    snapshot = node.fresh_snapshot()
    return {
        "node_id": snapshot.node_id, "name": snapshot.name, "address": snapshot.address,
        "state": snapshot.hosting.state, "hosting": dataclasses.asdict(snapshot.hosting),
        "guests": [dataclasses.asdict(g) for g in snapshot.guests],
        "peers": [dataclasses.asdict(p) for p in snapshot.peers],
        "assignments": len(snapshot.assignments),
        "events": [dataclasses.asdict(e) for e in snapshot.events[-20:]],
    }


async def _peers(node: Node, args: dict[str, Any]) -> list[dict[str, Any]]:
    return [dataclasses.asdict(p) for p in node.fresh_snapshot().peers]


async def _plugins(node: Node, args: dict[str, Any]) -> list[dict[str, Any]]:
    await node.registry.scan_async()
    return [info.to_plain() for info in node.registry.plugins()]


async def _add_plugin(node: Node, args: dict[str, Any]) -> dict[str, Any]:
    return (await node.execute(AddPlugin(path=_text(args, "path")))).to_plain()


async def _submit(node: Node, args: dict[str, Any]) -> dict[str, Any]:
    params = args.get("params", {})
    if not isinstance(params, dict):
        raise ProtocolError("control argument 'params' must be a map")
    one_per_host = args.get("one_per_host", False)
    if not isinstance(one_per_host, bool):
        raise ProtocolError("control argument 'one_per_host' must be true or false")
    inputs = args.get("inputs") or {}
    if not isinstance(inputs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in inputs.items()):
        raise ProtocolError("control argument 'inputs' must map input file names to paths")
    return await node.execute(SubmitAssignment(
        plugin=_text(args, "plugin"), params=params, one_per_host=one_per_host, inputs=inputs,
    ))


async def _assignments(node: Node, args: dict[str, Any]) -> list[dict[str, Any]]:
    now = time.time()
    live = node.live_progress()
    return [_assignment_json(assignment_view(r, now=now, results_dir=node.results_dir, live=live,
                                            etas=node.unit_etas()))
            for r in node.store.assignments()]


async def _assignment(node: Node, args: dict[str, Any]) -> dict[str, Any]:
    record = node.store.assignment(_text(args, "assignment"))
    live = node.live_progress()
    return _assignment_json(assignment_view(record, now=time.time(), results_dir=node.results_dir, live=live,
                                           etas=node.unit_etas()))


def _assignment_json(view) -> dict[str, Any]:
    data = dataclasses.asdict(view)
    for unit in data["units"]:
        unit["id"] = unit["task_id"]
    return data


async def _result(node: Node, args: dict[str, Any]) -> dict[str, Any]:
    """Save the combined result to `output` and, given `files` (a folder), the units' output files there."""
    assignment_id = _text(args, "assignment")
    data, media_type, _filename = node.store.result(assignment_id)
    path = Path(_text(args, "output"))
    await trio.to_thread.run_sync(write_atomically, path, data)
    reply: dict[str, Any] = {"path": str(path), "bytes": len(data), "media_type": media_type}
    folder = _text(args, "files", optional=True)
    if folder is not None:
        reply["files"] = await trio.to_thread.run_sync(save_files, node.store, assignment_id, Path(folder))
        reply["files_folder"] = folder
    return reply


async def _cancel(node: Node, args: dict[str, Any]) -> str:
    return await node.execute(CancelAssignment(assignment_id=_text(args, "assignment")))


async def _pause(node: Node, args: dict[str, Any]) -> dict[str, str]:
    until = _text(args, "until", optional=True)
    at = parse_until(until, now=time.time()) if until else None
    return {"message": await node.execute(PauseHosting(until=at))}


async def _resume(node: Node, args: dict[str, Any]) -> dict[str, str]:
    return {"message": await node.execute(ResumeHosting())}


async def _finish(node: Node, args: dict[str, Any]) -> dict[str, str]:
    return {"message": await node.execute(FinishThenPause())}


async def _evict(node: Node, args: dict[str, Any]) -> dict[str, str]:
    return {"message": await node.execute(EvictGuests(task_id=_text(args, "task", optional=True)))}


async def _events(node: Node, args: dict[str, Any]) -> list[dict[str, Any]]:
    """The recent event log (what the Events tab shows), oldest first."""
    return [dataclasses.asdict(e) for e in node.fresh_snapshot().events]


async def _move(node: Node, args: dict[str, Any]) -> dict[str, str]:
    return {"message": await node.execute(MoveTask(task_id=_text(args, "task"), node=_text(args, "node")))}


async def _remeasure(node: Node, args: dict[str, Any]) -> dict[str, Any]:
    return dataclasses.asdict(await node.machine.remeasure())


_VERBS = {
    "status": _status, "peers": _peers, "plugins": _plugins, "add-plugin": _add_plugin, "submit": _submit,
    "assignments": _assignments, "assignment": _assignment, "result": _result, "cancel": _cancel,
    "pause": _pause, "resume": _resume, "finish": _finish, "evict": _evict, "move": _move,
    "events": _events, "remeasure": _remeasure,
}
