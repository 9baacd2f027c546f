"""Discovery: broadcast announcements answered by delayed unicast replies, and joining through seeds."""

import random

import pytest
import trio

from frost_core.membership import MembershipConfig
from frost_core.membership.discovery import reply_delay
from frost_core.membership.testing import open_sim_cluster


@pytest.mark.parametrize(("gossip_interval", "newcomers"), [(2.0, 1), (0.05, 4)], ids=["replies-first", "gossip-first"])
async def test_a_newcomer_is_answered_by_delayed_replies_and_learns_everyone(autojump_clock, gossip_interval,
                                                                              newcomers):
    """With fast gossip a newcomer may hold the table before any reply comes: it must still say so.

    Which comes first also depends on trio's scheduling order, so that case has several newcomers.
    """
    config = MembershipConfig(reply_delay_max=2.0, announce_interval=1e6, gossip_interval=gossip_interval)
    async with open_sim_cluster(11, config=config) as cluster:
        nodes = [await cluster.start_node() for _ in range(30)]
        # The thirty know each other and their replies are over: ten rounds and two reply windows (20 s of
        # 0.05 s rounds cost 15 s of CPU).
        await trio.sleep(max(10 * gossip_interval, 2 * config.reply_delay_max))
        for _ in range(newcomers):
            arrived = trio.current_time()
            sent_before = sum(node.membership.discovery.replies_sent for node in nodes)
            newcomer = await cluster.start_node()
            await trio.sleep(config.reply_delay_max + 5)
            assert len(newcomer.membership.members()) == len(nodes) + 1
            assert all(len(node.membership.members()) == len(nodes) + 1 for node in nodes)
            replies = newcomer.membership.discovery.replies_received
            # someone answered, but once the newcomer had the table the others held their replies
            assert 1 <= replies <= 5
            assert sum(node.membership.discovery.replies_sent for node in nodes) - sent_before == replies
            heard = [node.membership.member(newcomer.node_id).updated_at for node in nodes]
            assert max(heard) - arrived < 1.0  # everyone heard the broadcast itself at once
            nodes.append(newcomer)


def test_reply_delays_spread_over_the_whole_window():
    rng = random.Random(5)
    delays = [reply_delay(rng, 2.0) for _ in range(1000)]
    assert 0.0 <= min(delays) < 0.1 and 1.9 < max(delays) <= 2.0


async def test_nodes_that_broadcast_cannot_reach_join_through_any_seed(autojump_clock):
    config = MembershipConfig(announce_interval=1e6)
    async with open_sim_cluster(12, config=config) as cluster:
        first = await cluster.start_node()
        others = [await cluster.start_node(seeds=(("10.9.9.9", 7946), first.address)) for _ in range(5)]
        everyone = [first, *others]
        cluster.network.partition({n.address for n in everyone})  # the dead seed is unreachable
        await trio.sleep(15)
        assert all(len(n.membership.members()) == 6 for n in everyone)


async def test_a_seed_that_comes_up_later_is_retried(autojump_clock):
    config = MembershipConfig(announce_interval=1e6)
    async with open_sim_cluster(13, config=config) as cluster:
        seed_address = ("10.0.0.2", 7946)  # the second node started will live here
        early = await cluster.start_node(seeds=(seed_address,))
        await trio.sleep(10)
        assert len(early.membership.members()) == 1
        seed = await cluster.start_node()
        assert seed.address == seed_address
        await trio.sleep(config.seed_retry_interval + 2)
        assert len(early.membership.members()) == 2 and len(seed.membership.members()) == 2
