"""An idle node's loop sleeps between its timers: a lone member probes nobody, and the clock watchers wake together."""

import trio

from frost_core.events import EventLog
from frost_core.master.scheduler import MasterScheduler, MasterSettings
from frost_core.master.store import MasterStore
from frost_core.membership import MembershipConfig
from frost_core.membership.testing import open_sim_cluster
from frost_core.storage.checkpoints import CheckpointStore

IDLE_SECONDS = 60.0


class WakeCount(trio.abc.Instrument):
    """The moments at which some task ran: under the autojump clock, each is one wake-up of a real node's loop."""

    def __init__(self) -> None:
        self.moments: set[float] = set()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.moments.add(trio.current_time())

    @property
    def wakes(self) -> int:
        return len(self.moments)


def idle_master(tmp_path) -> MasterScheduler:
    """A master with nothing to do, as a lone node runs it (its stop watcher included)."""
    return MasterScheduler(
        node_id="m" * 32, store=MasterStore(tmp_path / "master.sqlite", node_id="m" * 32), registry=None, links=None,
        events=EventLog(), results_dir=tmp_path / "results", replicas=CheckpointStore(tmp_path / "replicas"),
        local_checkpoints=CheckpointStore(tmp_path / "local"), hosts=lambda: [], settings=MasterSettings,
        on_change=lambda: None, alive=lambda: [], clock=trio.current_time, blocking=inline,
    )


async def inline(function, *args):
    return function(*args)


async def test_a_lone_idle_node_wakes_about_twice_a_second(autojump_clock, tmp_path):
    # The membership's lag watcher and the master's stop watcher look at the clock every 0.5 s, the master's
    # round comes every second; the prober had nobody to probe but still woke every 0.25 s. Announces off:
    # the rate is the timers'.
    master = idle_master(tmp_path)
    try:
        async with open_sim_cluster(1, config=MembershipConfig(announce_interval=1e6)) as cluster:
            await cluster.start_node()
            await trio.sleep(0.37)  # the master starts when the node has scanned its plugins: any moment
            await cluster.nursery.start(master.serve)
            await trio.sleep(5)  # past the start-up's joins and first rounds
            count = WakeCount()
            trio.lowlevel.add_instrument(count)
            await trio.sleep(IDLE_SECONDS)
            trio.lowlevel.remove_instrument(count)
    finally:
        master._store.close()
    # Left: the watchers and the round on one 0.5 s grid (2 a second) and a gossip round every 2 s, 2.5 a second;
    # it was 8.5 (3.5 with the master's round off the grid).
    assert count.wakes / IDLE_SECONDS < 3.0, f"{count.wakes / IDLE_SECONDS:.2f} wake-ups a second"


async def test_a_node_alone_at_first_probes_a_peer_that_joins_later(autojump_clock):
    async with open_sim_cluster(2, config=MembershipConfig(announce_interval=1e6)) as cluster:
        first = await cluster.start_node()
        await trio.sleep(30)  # alone long enough for its prober to wait for a peer
        second = await cluster.start_node(seeds=(first.address,))
        await trio.sleep(10)
        assert second.node_id in first.membership.prober.rtt, "the lone node never probed the newcomer"
