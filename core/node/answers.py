"""How a node answers each typed query: the slice of its state the query asks for, as frozen views."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import trio

from frost_core.api.errors import FrostError
from frost_core.api.queries import (
    FetchResult, FindUnits, FoundUnits, GetAssignment, GetLedger, GetStatus, ListAssignments, ListEvents, ListPeers,
    ListPlugins, NodeStatus, Query, SavedResult,
)
from frost_core.api.snapshot import NodeSnapshot, UnitView
from frost_core.master.results import save_files, write_atomically
from frost_core.node.views import MAX_EVENTS_IN_SNAPSHOT, NodeParts, assignment_view, peer_views, plugin_view

STATUS_EVENTS = 20
"""How many of the latest events `status` carries; `ListEvents` has them all."""


class Answering(NodeParts, Protocol):
    """The node as a query sees it: its parts, and a snapshot built now."""

    def fresh_snapshot(self, *, assignments: bool = True) -> NodeSnapshot: ...


async def answer(node: Answering, query: Query) -> Any:
    """The reply to `query`, of the type the query declares as its REPLY."""
    match query:
        case GetStatus():
            snapshot = node.fresh_snapshot(assignments=False)
            return NodeStatus(
                node_id=snapshot.node_id, name=snapshot.name, address=snapshot.address,
                state=snapshot.hosting.state, hosting=snapshot.hosting, guests=snapshot.guests,
                peers=snapshot.peers, assignments=node.store.assignment_count(),
                events=snapshot.events[-STATUS_EVENTS:],
                problems=() if any(p.state == "alive" and not p.is_self for p in snapshot.peers)
                else tuple(node.refusals.values()),
            )
        case ListPeers():
            return peer_views(node)
        case ListEvents():
            return node.events.recent()[-MAX_EVENTS_IN_SNAPSHOT:]
        case ListPlugins():
            await node.registry.scan_async()
            return tuple(plugin_view(info) for info in node.registry.plugins())
        case ListAssignments():
            return tuple(_assignment(node, record) for record in node.store.assignments())
        case GetAssignment(assignment_id=assignment_id):
            return _assignment(node, node.store.assignment(assignment_id))
        case FindUnits(assignment_id=assignment_id, match=match, limit=limit):
            words = match.lower().split()
            found = [unit for unit in _assignment(node, node.store.assignment(assignment_id)).units
                     if unit_matches(unit, words)]
            return FoundUnits(units=tuple(found[:max(limit, 0)]), matched=len(found))
        case FetchResult(assignment_id=assignment_id, output=output, files=files):
            return await _fetch_result(node, assignment_id, Path(output), None if files is None else Path(files))
        case GetLedger(since=since):
            return await node.ledger.view_since(since)
    raise FrostError(f"unknown query {query!r}")


def unit_matches(unit: UnitView, words: list[str]) -> bool:
    """Whether every one of `words` (lower case) matches `unit` as `FindUnits` says: a number is the unit's own,
    another word a part of what its row shows (state, host, error, why it waits), "failed" once it failed."""
    shown = " ".join((unit.reported or unit.state, unit.host_name, unit.error or "", unit.waiting,
                      "failed" if unit.failures else "")).lower()
    return all(int(word) == unit.index if word.isdecimal() else word in shown for word in words)


def _assignment(node: Answering, record):
    return assignment_view(record, now=time.time(), results_dir=node.results_dir, live=node.live_progress(),
                           etas=node.unit_etas(), waiting=node.unit_waiting(), reported=node.unit_states(),
                           gangs=node.gang_views())


async def _fetch_result(node: Answering, assignment_id: str, output: Path, folder: Path | None) -> SavedResult:
    data, media_type, _filename = node.store.result(assignment_id)
    await trio.to_thread.run_sync(write_atomically, output, data)
    saved = SavedResult(path=str(output), bytes=len(data), media_type=media_type)
    if folder is None:
        return saved
    names = await trio.to_thread.run_sync(save_files, node.store, assignment_id, folder)
    return SavedResult(path=saved.path, bytes=saved.bytes, media_type=media_type, files=tuple(names),
                       files_folder=str(folder))
