"""How a node answers each typed query: the slice of its state the query asks for, as frozen views."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import trio

from frost_core.api.errors import FrostError
from frost_core.api.queries import (
    FetchResult, FindUnits, FoundUnits, GetAssignment, GetLedger, GetStatus, ListAssignments, ListEvents, ListPeers,
    ListPlugins, NodeStatus, Query, ReadResult, ResultData, SavedResult,
)
from frost_core.api.snapshot import SNAPSHOT_UNITS, AssignmentView, NodeSnapshot
from frost_core.master.results import exported_files_folder, save_files, write_atomically
from frost_core.master.placement import WaitingReasons
from frost_core.master.store import AssignmentRecord, MasterStore, UnitTally
from frost_core.node.control import MAX_REPLY_BYTES
from frost_core.node.views import (
    MAX_EVENTS_IN_SNAPSHOT, NodeParts, assignment_view, assignment_views, live_node_ids, peer_names, peer_views,
    plugin_views, unit_words,
)

READABLE_RESULT_BYTES = MAX_REPLY_BYTES - 64 * 1024
"""The biggest result `ReadResult` sends: one reply, with room for its envelope."""
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
            return plugin_views(node.registry.plugins())
        case ListAssignments():
            return assignment_views(node, now=time.time(), live=node.live_progress(), names=peer_names(node),
                                    alive=live_node_ids(node))
        case GetAssignment(assignment_id=assignment_id, every_unit=True):
            seen = _seen(node)
            return await trio.to_thread.run_sync(lambda: seen.view(node.store.assignment(assignment_id)))
        case GetAssignment(assignment_id=assignment_id):
            listed = node.store.listed(assignment_id, SNAPSHOT_UNITS)
            return _seen(node).view(listed.record, listed.tally)
        case FindUnits(assignment_id=assignment_id, match=match, limit=limit):
            seen = _seen(node)
            return await trio.to_thread.run_sync(_find_units, node.store, seen, assignment_id, match.lower().split(),
                                                 limit)
        case FetchResult(assignment_id=assignment_id, output=output, files=files):
            return await _fetch_result(node, assignment_id, Path(output), None if files is None else Path(files))
        case ReadResult(assignment_id=assignment_id):
            return await trio.to_thread.run_sync(_read_result, node.store, assignment_id)
        case GetLedger(since=since):
            return await node.ledger.view_since(since)
    raise FrostError(f"unknown query {query!r}")


def _find_units(store: MasterStore, seen: _Seen, assignment_id: str, words: list[str],
                limit: int | None) -> FoundUnits:
    """The units whose rows match every one of `words` (lower case), as `FindUnits` says: a number must be the
    unit's own, another word a part of the row as the screen shows it (`_shown`). Only the first `limit` found
    are read whole and made into views.

    Every unit's state, host and error is read (only the numbered one's, where a word is a number), and each
    different row is matched once: a row's text follows from those fields and what the node says of its task,
    and a big sweep's units share a few rows (done on one host or another, queued for one reason). At 100,000
    units the read takes 70 ms and the matching 50 (was 110, a row made for every unit). In a worker thread: the
    node's event loop has guests to pause meanwhile."""
    numbers = [int(word) for word in words if word.isdecimal()]
    texts = [word for word in words if not word.isdecimal()]
    verdicts: dict[tuple, bool] = {}
    matched = []
    for index, state, host, error, failures in store.searchable_units(assignment_id, min(numbers) if numbers else None):
        if any(number != index for number in numbers):
            continue
        # `unit_words` reads what the node says of a task only for a running unit (its host's report) and a queued
        # one (why it waits): the other units' rows need no task id, and share a key.
        task_id = f"{assignment_id}.{index}" if state in ("running", "queued") else ""
        row = (state, host, error, failures, seen.reported.get(task_id), seen.waiting.get(task_id),
               seen.leaving.get(task_id))
        verdict = verdicts.get(row)
        if verdict is None:
            shown = _shown(state, error, failures, **unit_words(state, host, task_id, names=seen.names,
                                                                 waiting=seen.waiting, reported=seen.reported,
                                                                 alive=seen.alive, leaving=seen.leaving,
                                                                 now=time.time()))
            verdict = verdicts[row] = all(word in shown for word in texts)
        if verdict:
            matched.append(index)
    listed = store.found(assignment_id, matched if limit is None else matched[:max(limit, 0)])
    return FoundUnits(units=seen.view(listed.record, listed.tally).units, matched=len(matched),
                      unit_count=listed.tally.count)


def _shown(state: str, error: str | None, failures: int, *, reported: str, host_name: str, waiting: str) -> str:
    """A unit's row in lower case, as a search reads it; "failed" in it once the unit failed at least once."""
    return " ".join((reported or state, host_name, error or "", waiting, "failed" if failures else "")).lower()


@dataclass(frozen=True)
class _Seen:
    """What the node knows of its units beside the store, copied on its event loop, so that a worker thread can
    make views of what it reads (`assignment_view`'s arguments)."""

    results_dir: Path
    live: dict[str, float]
    names: dict[str, str]
    etas: dict[str, float]
    waiting: Mapping[str, str]      # a queued unit's reason, else its assignment's (`WaitingReasons`)
    reported: dict[str, str]
    gangs: dict[str, Any]
    alive: frozenset[str]
    leaving: dict[str, float]

    def view(self, record: AssignmentRecord, tally: UnitTally | None = None) -> AssignmentView:
        """`record`'s view as a screen shows it; `tally`: of all its units, where `record` has some of them."""
        return assignment_view(record, now=time.time(), results_dir=self.results_dir, live=self.live,
                               names=self.names, etas=self.etas, waiting=self.waiting, reported=self.reported,
                               gangs=self.gangs, tally=tally, alive=self.alive, leaving=self.leaving)


def _seen(node: Answering) -> _Seen:
    waiting = node.unit_waiting()
    return _Seen(results_dir=node.results_dir, live=dict(node.live_progress()), names=peer_names(node),
                 etas=dict(node.unit_etas()), reported=dict(node.unit_states()), gangs=dict(node.gang_views()),
                 alive=live_node_ids(node), leaving=dict(node.unit_leaving()),
                 waiting=waiting.worked_out() if isinstance(waiting, WaitingReasons) else dict(waiting))


def _read_result(store: MasterStore, assignment_id: str) -> ResultData:
    data, media_type, filename = store.result(assignment_id)
    if len(data) > READABLE_RESULT_BYTES:
        raise FrostError(f"the result of {assignment_id} is {len(data) / 2**20:.0f} MiB, over the "
                         f"{READABLE_RESULT_BYTES // 2**20} MiB one reply carries: `frost-tui result {assignment_id}` "
                         "on the node's machine saves it there", title="Result too big to send")
    return ResultData(data=data, media_type=media_type, filename=filename)


async def _fetch_result(node: Answering, assignment_id: str, output: Path, folder: Path | None) -> SavedResult:
    data, media_type, filename = node.store.result(assignment_id)
    await trio.to_thread.run_sync(write_atomically, output, data)
    saved = SavedResult(path=str(output), bytes=len(data), media_type=media_type, named=filename)
    if folder is None:   # where the node put the units' files when the assignment finished, if they made any
        kept = exported_files_folder(node.results_dir, assignment_id)
        names = await trio.to_thread.run_sync(lambda: sorted(p.name for p in kept.iterdir()) if kept.is_dir() else [])
        return replace(saved, kept_files=tuple(names), kept_folder=str(kept) if names else "")
    names = await trio.to_thread.run_sync(save_files, node.store, assignment_id, folder)
    return replace(saved, files=tuple(names), files_folder=str(folder))
