"""The gang runtime's core (master.gang + cluster.gang_site) driving real heat-diffusion members."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frost_core.master.gang import GangCoordinator
from frost_core.plugin.gang import run_gang_locally
from frost_core.policies.gang_migration import CheckCadence
from frost_plugins.heat_diffusion import plugin as heat

from tests.scenario.gang_cluster import PARAMS, FakeCluster, reference_runs

REFERENCE = run_gang_locally(heat, PARAMS)
RUNS = reference_runs()


def assert_like_one_process(cluster: FakeCluster) -> None:
    assert cluster.output == REFERENCE
    for (epoch, rank, superstep), inbox in cluster.runs.items():
        assert inbox == RUNS[rank, superstep], f"rank {rank} read the wrong mail in superstep {superstep} (epoch {epoch})"


def test_a_quiet_gang_runs_on_three_hosts_and_combines_like_one_process():
    cluster = FakeCluster()
    cluster.drain()
    assert_like_one_process(cluster)
    view = cluster.coordinator.view()
    assert view.phase == "finished" and view.epoch == 1 and view.moves == 0
    assert len({m.host for m in view.members}) == 3


def run_until_superstep(cluster: FakeCluster, superstep: int) -> None:
    while cluster.queue and cluster.coordinator.superstep < superstep:
        cluster.deliver(0)


def test_an_owner_hog_on_a_members_host_moves_the_gang_at_the_next_check():
    cluster = FakeCluster()   # checks every 2 supersteps; 5 hosts for 3 members
    run_until_superstep(cluster, 1)
    hogged = cluster.member_host(1)
    cluster.hog(hogged)
    cluster.drain()
    assert_like_one_process(cluster)
    view = cluster.coordinator.view()
    assert hogged not in {m.host for m in view.members}
    assert view.moves == 1 and view.epoch == 2 and view.last_checkpoint.superstep <= 4
    assert [m.moves for m in view.members] == [0, 1, 0]


def test_mail_to_a_moved_member_is_forwarded_once_and_the_sender_learns_its_address():
    cluster = FakeCluster()
    run_until_superstep(cluster, 1)
    cluster.hog(cluster.member_host(1))
    cluster.drain()
    # The members that stayed still addressed rank 1 at its old host: it forwarded their mail,
    # once per sender; from then on the acknowledgements had told them where rank 1 is.
    assert cluster.forwarded == 2
    assert_like_one_process(cluster)


def test_fewer_usable_hosts_than_members_waits_with_a_reason_then_places():
    cluster = FakeCluster(hosts=3)
    cluster.hog("h2")
    cluster.crash(cluster.member_host(0))
    view = cluster.coordinator.view()
    assert view.phase == "waiting"
    assert "needs 3 hosts that can take a member, 1 can" in view.reason
    cluster.owner_leaves("h2")
    assert cluster.coordinator.view().phase == "waiting"
    cluster.revive("h0" if "h0" in cluster.crashed else "h1")
    cluster.drain()
    assert_like_one_process(cluster)


def test_an_evicting_host_restarts_the_gang_from_the_last_global_checkpoint_at_once():
    cluster = FakeCluster()
    cluster.move(0)                      # a global checkpoint at the first barrier
    run_until_superstep(cluster, 3)
    evicted = cluster.member_host(2)
    cluster.evict(evicted)
    view = cluster.coordinator.view()
    assert view.phase == "running" and view.superstep == view.last_checkpoint.superstep == 1
    assert evicted not in {m.host for m in view.members}
    cluster.drain()
    assert_like_one_process(cluster)
    assert cluster.coordinator.view().restarts == 1


def test_a_coordinator_started_again_from_the_kept_checkpoint_resumes_at_its_superstep():
    cluster = FakeCluster()
    cluster.move(0)                      # a global checkpoint at the first barrier
    run_until_superstep(cluster, 3)
    kept = cluster.coordinator.checkpoint
    # The master restarts: a new coordinator from the checkpoint on its disk, in an epoch above the old
    # life's, over hosts that still run the old members (their reports and mail are refused).
    cluster.coordinator = GangCoordinator("g", cluster.size, cadence=CheckCadence(every_supersteps=2), epoch=100,
                                          checkpoint=kept)
    cluster.table_changed()
    assert cluster.coordinator.view().superstep == kept.superstep == 1
    cluster.drain()
    assert_like_one_process(cluster)
    assert min(superstep for epoch, _, superstep in cluster.runs if epoch > 100) == 1

def test_a_late_report_from_before_a_crash_is_refused_not_applied():
    cluster = FakeCluster()
    run_until_superstep(cluster, 2)
    crashed = cluster.member_host(0)
    cluster.crash(crashed)
    reports = [item for item in cluster.history if type(item[2]).__name__ == "BarrierReport"]
    cluster.replay(cluster.history.index(reports[-1]))
    cluster.drain()
    assert_like_one_process(cluster)
    assert any("epoch 1 is over" in refusal.reason for refusal in cluster.refused)


def test_a_straggler_is_visible_as_the_others_waiting_at_the_barrier():
    cluster = FakeCluster()
    # Hold rank 2's answers back: deliver everything else first each time.
    while cluster.queue:
        slow = cluster.member_host(2)
        index = next((i for i, item in enumerate(cluster.queue) if item[1] != ("guest", slow)), 0)
        cluster.deliver(index)
    waited = [m.waited for m in cluster.coordinator.view().members]
    assert waited[2] < min(waited[0], waited[1])
    assert_like_one_process(cluster)


EVENTS = ("deliver",) * 6 + ("duplicate", "replay", "hog", "hog", "owner_leaves", "move", "evict", "crash",
                            "revive", "cut_off", "heal")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(EVENTS), st.integers(0, 10**6)), max_size=150))
def test_any_interleaving_of_moves_failures_and_bad_reports_gives_the_one_process_result(script):
    cluster = FakeCluster(hosts=6)
    for event, number in script:
        host = cluster.names[number % len(cluster.names)]
        member = cluster.member_host(number)
        if event == "deliver":   # a few messages, each picked anywhere in the queue
            for turn in range(number % 12):
                if cluster.queue:
                    cluster.deliver(number // 12 + 7919 * turn)
        elif event == "duplicate" and cluster.queue:
            cluster.duplicate(number)
        elif event == "replay" and cluster.history:
            cluster.replay(number)
        elif event == "hog" and member:
            cluster.hog(member)
        elif event == "owner_leaves":
            cluster.owner_leaves(host)
        elif event in ("evict", "crash", "cut_off") and member and member not in cluster.crashed | cluster.cut:
            getattr(cluster, event)(member)
        elif event == "revive" and host in cluster.crashed:
            cluster.revive(host)
        elif event == "heal" and host in cluster.cut:
            cluster.heal(host)
        elif event == "move":
            cluster.move(number % cluster.size)
    for host in sorted(cluster.cut):
        cluster.heal(host)
    for host in sorted(cluster.crashed):
        cluster.revive(host)
    for host in cluster.names:
        cluster.owner_leaves(host)
    cluster.drain()
    assert_like_one_process(cluster)


def test_a_crash_mid_superstep_restarts_everyone_from_the_last_global_checkpoint():
    cluster = FakeCluster()
    cluster.move(1)                      # a global checkpoint at the first barrier
    run_until_superstep(cluster, 3)
    while not any(m.at_barrier for m in cluster.coordinator.view().members):
        cluster.deliver(0)
    straggler = next(m for m in cluster.coordinator.view().members if not m.at_barrier)
    cluster.crash(straggler.host)        # the others reported superstep 3; it never will
    view = cluster.coordinator.view()
    assert (view.epoch, view.superstep, view.restarts) == (3, 1, 1)
    assert straggler.host not in {m.host for m in view.members}
    cluster.drain()
    assert_like_one_process(cluster)
