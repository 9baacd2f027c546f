"""The gang coordinator alone: placement, the barrier, checks, global checkpoints, refusals."""

from __future__ import annotations

import pytest

from frost_core.api.errors import ProtocolError
from frost_core.cluster.gang_site import (
    BarrierReport,
    CheckpointReport,
    GangCheck,
    ReleaseStep,
    Send,
    StartMember,
    StopMember,
    TakeCheckpoint,
)
from frost_core.master.gang import (
    Combine,
    GangCoordinator,
    GangFailed,
    HostFree,
    HostHeld,
    HostLost,
    LeaveHost,
    MoveGang,
    Received,
    Refused,
    TableChanged,
)
from frost_core.plugin.gang import MemberCheckpoint
from frost_core.policies.gang_migration import CheckCadence
from frost_core.policies.views import NodeView


def table(**available):
    return tuple(NodeView(name, available=figure, guests=0) for name, figure in available.items())


def placed(cadence=CheckCadence(every_supersteps=2)):
    coordinator = GangCoordinator("g", 3, cadence=cadence)
    actions = coordinator.handle(TableChanged(0.0, table(a=0.5, b=1.0, c=0.9, d=0.8)))
    return coordinator, actions


def report(coordinator, at, rank, superstep, sent_to=(), move=None, done=False, result=None, epoch=None):
    message = BarrierReport("g", coordinator.epoch if epoch is None else epoch, rank, superstep,
                            frozenset(sent_to), move, done, result)
    return coordinator.handle(Received(at, message))


def barrier(coordinator, at, superstep, move=None, ring=True):
    actions = []
    for rank in range(3):
        actions = report(coordinator, at, rank, superstep, {(rank + 1) % 3} if ring else (), move)
    return actions


def test_the_members_start_on_the_best_three_distinct_hosts():
    coordinator, actions = placed()
    assert [(a.to, a.message) for a in actions] == [
        (host, StartMember("g", rank, 3, 1, 0, None)) for rank, host in enumerate(["b", "c", "d"])]


def test_fewer_hosts_that_can_take_a_member_than_members_waits_and_says_why():
    coordinator = GangCoordinator("g", 3)
    rows = table(a=1.0, b=1.0) + (NodeView("c", 1.0, 0, owner_active=True),)
    assert coordinator.handle(TableChanged(0.0, rows)) == []
    view = coordinator.view()
    assert (view.phase, view.reason) == ("waiting", "needs 3 hosts that can take a member, 2 can (a, b)")
    # As the owner reads it: the peers' names (the node passes `peer_named`), not their 32-digit ids.
    named = GangCoordinator("g", 3, named={"a": "curie", "b": "babbage"}.get)
    named.handle(TableChanged(0.0, rows))
    assert named.view().reason == "needs 3 hosts that can take a member, 2 can (babbage, curie)"



def test_hosts_without_the_members_memory_free_for_guests_are_skipped():
    coordinator = GangCoordinator("g", 2, memory=512 << 20)   # its plugin declares 512 MiB a member
    # b is the fastest but has only 300 MiB free for guests; c has just enough.
    rows = (NodeView("a", 0.5, 0), NodeView("b", 1.0, 0, free_memory=300 << 20), NodeView("c", 0.8, 0, free_memory=512 << 20))
    actions = coordinator.handle(TableChanged(0.0, rows))
    assert [(a.to, a.message.rank) for a in actions] == [("c", 0), ("a", 1)]
    coordinator = GangCoordinator("g", 3, memory=512 << 20)
    assert coordinator.handle(TableChanged(0.0, rows)) == []
    assert coordinator.view().reason == "needs 3 hosts that can take a member, 2 can (a, c); 1 more lack 512 MiB free for it"

def test_the_next_superstep_is_released_only_when_all_have_reported_naming_whose_mail_to_wait_for():
    coordinator, _ = placed(CheckCadence(every_supersteps=None, every_seconds=None))
    assert report(coordinator, 1.0, 0, 0, {1}) == []
    assert report(coordinator, 2.0, 2, 0, {0, 1}) == []
    actions = report(coordinator, 5.0, 1, 0, {2})
    assert [a.message for a in actions] == [
        ReleaseStep("g", 0, 1, 1, frozenset({2})), ReleaseStep("g", 1, 1, 1, frozenset({0, 2})),
        ReleaseStep("g", 2, 1, 1, frozenset({1}))]
    assert [m.waited for m in coordinator.view().members] == [4.0, 0.0, 3.0]   # rank 1 was the straggler


def test_a_repeated_stale_or_early_report_is_refused_not_applied():
    coordinator, _ = placed()
    report(coordinator, 1.0, 0, 0)
    assert "already applied" in report(coordinator, 1.0, 0, 0)[0].reason
    assert "not the one running" in report(coordinator, 1.0, 1, 1)[0].reason
    assert "epoch 0 is over" in report(coordinator, 1.0, 1, 0, epoch=0)[0].reason
    assert report(coordinator, 1.0, 1, 0) == [] and coordinator.superstep == 0


def test_a_check_rides_on_the_release_and_a_single_yes_checkpoints_the_whole_gang():
    coordinator, _ = placed()
    first = barrier(coordinator, 1.0, 0)
    assert all(a.message.check is None for a in first)          # one superstep since the start
    second = barrier(coordinator, 2.0, 1)
    assert all(a.message.check == GangCheck(frozenset("bcd"), 1.0) for a in second)
    report(coordinator, 3.0, 0, 2, {1}, move=False)
    report(coordinator, 3.0, 1, 2, {2}, move=True)
    actions = report(coordinator, 3.0, 2, 2, {0}, move=False)
    assert [a.message for a in actions] == [TakeCheckpoint("g", rank, 1, 3, frozenset({(rank - 1) % 3})) for rank in range(3)]
    assert coordinator.view().phase == "checkpointing"


def test_no_answer_at_a_check_releases_as_usual():
    coordinator, _ = placed()
    barrier(coordinator, 1.0, 0)
    barrier(coordinator, 2.0, 1)
    assert all(isinstance(a.message, ReleaseStep) for a in barrier(coordinator, 3.0, 2, move=False))


def image(rank, superstep=3):
    return CheckpointReport("g", 1, rank, superstep, MemberCheckpoint(rank, superstep, f"s{rank}", {}).to_bytes())


def checkpointing(coordinator):
    coordinator.handle(TableChanged(0.5, table(a=2.0, b=1.0, c=0.9, d=0.1)))
    barrier(coordinator, 1.0, 0)
    barrier(coordinator, 2.0, 1)
    barrier(coordinator, 3.0, 2, move=True)


def test_the_global_checkpoint_counts_only_when_all_three_are_in_then_the_gang_restarts_on_the_new_best():
    coordinator, _ = placed()
    checkpointing(coordinator)
    coordinator.handle(Received(4.0, image(0)))
    assert "already in" in coordinator.handle(Received(4.0, image(0)))[0].reason
    confused = CheckpointReport("g", 1, 1, 3, image(1, superstep=2).data)
    assert "holds rank 1 before superstep 2" in coordinator.handle(Received(4.0, confused))[0].reason
    coordinator.handle(Received(4.0, image(1)))
    assert coordinator.checkpoint is None
    actions = coordinator.handle(Received(5.0, image(2)))
    last = coordinator.view().last_checkpoint
    assert (last.superstep, last.at, last.size) == (3, 5.0, sum(len(image(rank).data) for rank in range(3)))
    sent = [(a.to, a.message) for a in actions]
    assert ("d", StopMember("g", 2, 2, forward_to="a")) in sent
    assert ("b", StopMember("g", 0, 2, forward_to=None)) in sent
    assert ("a", StartMember("g", 2, 3, 2, 3, image(2).data)) in sent
    view = coordinator.view()
    assert (view.epoch, view.moves, coordinator.hosts()) == (2, 1, ("b", "c", "a"))


def test_a_host_lost_during_a_checkpoint_restarts_from_the_previous_one_at_once():
    coordinator, _ = placed()
    checkpointing(coordinator)
    coordinator.handle(Received(4.0, image(0)))
    actions = coordinator.handle(HostLost(4.5, "c", "crashed"))
    starts = [a.message for a in actions if isinstance(a.message, StartMember)]
    assert [(s.epoch, s.superstep, s.checkpoint) for s in starts] == [(2, 0, None)] * 3
    assert "c" not in coordinator.hosts() and not any(a.to == "c" for a in actions)
    late = coordinator.handle(Received(5.0, image(1)))
    assert isinstance(late[0], Refused)


def test_results_are_combined_only_when_all_finish_in_the_same_epoch():
    coordinator, _ = placed()
    report(coordinator, 1.0, 0, 0, done=True, result="r0")
    report(coordinator, 1.0, 1, 0, done=True, result="r1")
    coordinator.handle(HostLost(1.5, "d", "evicting"))
    assert report(coordinator, 2.0, 2, 0, done=True, result="old", epoch=1)[0].reason.startswith("epoch 1 is over")
    for rank in range(2):
        assert report(coordinator, 3.0, rank, 0, done=True, result=f"r{rank}") == []
    actions = report(coordinator, 3.0, 2, 0, done=True, result="r2")
    assert actions[-1] == Combine(("r0", "r1", "r2")) and coordinator.view().phase == "finished"


def test_members_that_disagree_on_finishing_fail_the_gang_with_the_contracts_reason():
    coordinator, _ = placed()
    report(coordinator, 1.0, 0, 0, done=True)
    report(coordinator, 1.0, 1, 0)
    actions = report(coordinator, 1.0, 2, 0)
    assert actions[-1] == GangFailed("superstep 0: rank 0 said done but ranks 1, 2 did not; "
                                     "all members must finish at the same superstep")
    assert all(isinstance(a, Send) and isinstance(a.message, StopMember) for a in actions[:-1])


def test_moving_a_member_leaves_its_host_at_the_next_barrier():
    coordinator, _ = placed(CheckCadence(every_supersteps=None, every_seconds=None))
    coordinator.handle(MoveGang(0.5, 1, "the owner pressed m"))
    assert all(isinstance(a.message, TakeCheckpoint) for a in barrier(coordinator, 1.0, 0))
    for rank in range(3):
        coordinator.handle(Received(2.0, image(rank, superstep=1)))
    assert coordinator.hosts() == ("b", "a", "d")
    assert [m.moves for m in coordinator.view().members] == [0, 1, 0]


def test_a_check_falls_due_after_its_seconds_by_the_events_own_time():
    coordinator, _ = placed(CheckCadence(every_supersteps=None, every_seconds=60.0))
    assert all(a.message.check is None for a in barrier(coordinator, 59.0, 0))
    assert all(a.message.check is not None for a in barrier(coordinator, 60.0, 1))
    assert all(a.message.check is None for a in barrier(coordinator, 100.0, 2))   # 40 s since that check


def test_a_message_a_coordinator_does_not_take_is_a_protocol_error():
    coordinator, _ = placed()
    with pytest.raises(ProtocolError, match="does not take a StartMember"):
        coordinator.handle(Received(1.0, StartMember("g", 0, 3, 1, 0, None)))


def test_a_forced_cadence_checkpoints_at_every_check_and_restarts_on_the_best_p_though_no_member_asked():
    coordinator, _ = placed(CheckCadence(every_supersteps=2, every_seconds=None, forced=True))
    assert all(isinstance(a.message, ReleaseStep) for a in barrier(coordinator, 1.0, 0))
    checked = barrier(coordinator, 2.0, 1)
    assert all(a.message.check is not None for a in checked)
    taking = barrier(coordinator, 3.0, 2, move=False)        # every member answers "stay"
    assert [type(a.message) for a in taking] == [TakeCheckpoint] * 3
    for rank in range(3):
        actions = coordinator.handle(Received(4.0, image(rank, superstep=3)))
    assert [(a.to, a.message) for a in actions if isinstance(a.message, StartMember)] == [
        (host, StartMember("g", rank, 3, 2, 3, image(rank, superstep=3).data)) for rank, host in enumerate("bcd")]
    assert coordinator.view().moves == 0 and coordinator.view().last_checkpoint.superstep == 3


def test_a_host_whose_owner_holds_its_member_is_left_when_the_timed_check_falls_due_from_the_last_checkpoint():
    coordinator, _ = placed(CheckCadence(every_supersteps=None, every_seconds=10.0))
    barrier(coordinator, 4.0, 0)
    # d's owner needs the machine at 5 s: its member stops (SIGSTOP) before reaching the next barrier.
    assert coordinator.handle(HostHeld(5.0, "d", "is held by its owner")) == []   # 5 s since the start
    rows = table(a=0.5, b=1.0, c=0.9, d=0.8)
    assert coordinator.handle(TableChanged(9.9, rows)) == []
    actions = coordinator.handle(TableChanged(10.0, rows))          # the check falls due: nobody waits for d
    starts = [(a.to, a.message) for a in actions if isinstance(a.message, StartMember)]
    assert starts == [("b", StartMember("g", 0, 3, 2, 0, None)), ("c", StartMember("g", 1, 3, 2, 0, None)),
                      ("a", StartMember("g", 2, 3, 2, 0, None))]   # from the last global checkpoint (none: 0)
    assert ("d", StopMember("g", 2, 2, forward_to="a")) in [(a.to, a.message) for a in actions]
    view = coordinator.view()
    assert (view.phase, view.restarts, view.reason) == ("running", 1, "d is held by its owner")
    assert coordinator.handle(TableChanged(30.0, rows)) == []       # d no longer carries a member


def test_a_held_host_is_not_chosen_until_it_is_free_and_an_owner_who_leaves_in_time_keeps_the_gang():
    coordinator, _ = placed(CheckCadence(every_supersteps=None, every_seconds=10.0))
    coordinator.handle(HostHeld(2.0, "d", "is held by its owner"))
    assert coordinator.handle(HostFree(8.0, "d")) == []
    assert coordinator.handle(TableChanged(12.0, table(a=0.5, b=1.0, c=0.9, d=0.8))) == []
    assert coordinator.view().restarts == 0
    waiting = GangCoordinator("w", 3)
    waiting.handle(HostHeld(0.0, "d", "is held by its owner"))
    assert waiting.handle(TableChanged(0.0, table(b=1.0, c=0.9, d=0.8))) == []
    assert "2 can (b, c)" in waiting.view().reason
    assert [a.to for a in waiting.handle(HostFree(1.0, "d"))] == ["b", "c", "d"]


def test_a_finishing_owners_host_is_left_at_the_first_barrier_at_which_p_others_can_take_the_members():
    coordinator, _ = placed(CheckCadence(every_supersteps=None, every_seconds=None))
    coordinator.handle(TableChanged(0.5, table(a=0.0, b=1.0, c=0.9, d=0.8)))   # a offers nothing yet
    assert coordinator.handle(LeaveHost(0.6, "d", "its owner is finishing")) == []
    assert all(isinstance(a.message, ReleaseStep) for a in barrier(coordinator, 1.0, 0))   # nowhere to go: on
    coordinator.handle(TableChanged(1.5, table(a=0.5, b=1.0, c=0.9, d=0.8)))
    assert all(isinstance(a.message, TakeCheckpoint) for a in barrier(coordinator, 2.0, 1))
    for rank in range(3):
        coordinator.handle(Received(3.0, CheckpointReport("g", 1, rank, 2, MemberCheckpoint(rank, 2, "s", {}).to_bytes())))
    view = coordinator.view()
    assert coordinator.hosts() == ("b", "c", "a") and (view.restarts, view.moves, view.last_checkpoint.superstep) == (0, 1, 2)
    assert "d its owner is finishing" in view.reason


def test_a_move_that_finds_no_other_host_checkpoints_stays_and_leaves_at_the_first_barrier_where_it_can():
    coordinator, _ = placed(CheckCadence(every_supersteps=None, every_seconds=None))
    coordinator.handle(TableChanged(0.5, table(a=0.0, b=1.0, c=0.9, d=0.8)))   # a busy for a moment
    coordinator.handle(MoveGang(0.6, 2, "the owner pressed m"))
    assert all(isinstance(a.message, TakeCheckpoint) for a in barrier(coordinator, 1.0, 0))
    for rank in range(3):
        coordinator.handle(Received(2.0, image(rank, superstep=1)))
    assert coordinator.hosts() == ("b", "c", "d") and coordinator.view().moves == 0
    assert all(isinstance(a.message, ReleaseStep) for a in barrier(coordinator, 3.0, 1))   # still nowhere to go
    coordinator.handle(TableChanged(3.5, table(a=0.5, b=1.0, c=0.9, d=0.8)))
    assert all(isinstance(a.message, TakeCheckpoint) for a in barrier(coordinator, 4.0, 2))
    for rank in range(3):
        coordinator.handle(Received(5.0, CheckpointReport("g", 2, rank, 3, image(rank, superstep=3).data)))
    assert coordinator.hosts() == ("b", "c", "a") and coordinator.view().moves == 1


def test_a_periodic_checkpoint_is_taken_at_the_first_barrier_after_its_interval_and_the_gang_stays():
    # No checks, so only the periodic checkpoint takes one (the product's [gang] checkpoint_interval is 600 s).
    coordinator = GangCoordinator("g", 3, cadence=CheckCadence(every_supersteps=None, every_seconds=None),
                                  checkpoint_interval=600.0)
    coordinator.handle(TableChanged(0.0, table(a=0.5, b=1.0, c=0.9, d=0.8)))
    assert all(isinstance(a.message, ReleaseStep) for a in barrier(coordinator, 300.0, 0))
    actions = barrier(coordinator, 650.0, 1)
    assert [a.message for a in actions] == [TakeCheckpoint("g", rank, 1, 2, frozenset({(rank - 1) % 3})) for rank in range(3)]
    assert coordinator.view().phase == "checkpointing"
    coordinator.handle(Received(651.0, image(0, superstep=2)))
    coordinator.handle(Received(651.0, image(1, superstep=2)))
    actions = coordinator.handle(Received(652.0, image(2, superstep=2)))
    # The members go on where they are, in the same epoch: the release they would have had at that barrier.
    assert [(a.to, a.message) for a in actions] == [
        (host, ReleaseStep("g", rank, 1, 2, frozenset({(rank - 1) % 3}))) for rank, host in enumerate("bcd")]
    view = coordinator.view()
    assert (view.phase, view.epoch, view.moves, view.restarts, view.superstep) == ("running", 1, 0, 0, 2)
    assert (view.last_checkpoint.superstep, view.last_checkpoint.at) == (2, 652.0)
    # The next one falls due 600 s after that one was in, not after the placement.
    assert all(isinstance(a.message, ReleaseStep) for a in barrier(coordinator, 1200.0, 2))
    assert all(isinstance(a.message, TakeCheckpoint) for a in barrier(coordinator, 1260.0, 3))


def test_a_host_lost_during_a_periodic_checkpoint_restarts_from_the_previous_one():
    coordinator = GangCoordinator("g", 3, cadence=CheckCadence(every_supersteps=None, every_seconds=None),
                                  checkpoint_interval=10.0)
    coordinator.handle(TableChanged(0.0, table(a=0.5, b=1.0, c=0.9, d=0.8)))
    barrier(coordinator, 20.0, 0)
    coordinator.handle(Received(21.0, image(0, superstep=1)))
    actions = coordinator.handle(HostLost(22.0, "c", "crashed"))
    assert [(a.message.epoch, a.message.superstep) for a in actions if isinstance(a.message, StartMember)] == [(2, 0)] * 3
    assert coordinator.view().phase == "running" and coordinator.checkpoint is None
    assert isinstance(coordinator.handle(Received(23.0, image(1, superstep=1)))[0], Refused)


def test_a_negative_checkpoint_interval_is_refused():
    with pytest.raises(ValueError, match="not an interval"):
        GangCoordinator("g", 3, checkpoint_interval=-1.0)


def test_a_gang_stopped_with_no_global_checkpoint_shows_it_starts_again_from_the_first_superstep():
    # It waited showing "superstep 614" after a member's host was lost: its members keep nothing since the last
    # global checkpoint, here none, so the owner reads where it will start again.
    coordinator, _ = placed(CheckCadence(every_supersteps=None, every_seconds=None))
    for superstep in range(4):
        barrier(coordinator, 1.0 + superstep, superstep)
    assert coordinator.view().superstep == 4
    coordinator.handle(TableChanged(5.0, table(b=1.0, c=0.9)))
    coordinator.handle(HostLost(5.5, "d", "evicting"))
    view = coordinator.view()
    assert view.phase == "waiting" and view.superstep == 0 and {m.superstep for m in view.members} == {0}, view
