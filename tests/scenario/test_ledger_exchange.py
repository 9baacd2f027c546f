"""Signed ledger summaries swapped over an in-memory network: honest news spreads, a forged or altered one is refused."""

from __future__ import annotations

import dataclasses
import random
import time

import trio

from frost_core.events import EventLog
from frost_core.ledger.book import Ledger
from frost_core.ledger.exchange import exchange_with
from frost_core.ledger.service import LedgerService
from frost_core.ledger.signing import NodeKey
from frost_core.ledger.summary import build_summary, sign_summary
from frost_core.membership.memory_transport import open_memory_network
from frost_core.wire.codec import decode_strict, encode
from tests.waiting import wait_until

DAY = 86400.0


def _service(tmp_path, name: str) -> tuple[LedgerService, EventLog]:
    events = EventLog()
    return LedgerService(Ledger(tmp_path / f"{name}.sqlite", node_id=name * 32),
                         NodeKey.load_or_create(tmp_path / f"{name}.key"), events=events, speed=lambda: 2.0,
                         names=lambda: {}, on_change=lambda: None), events


async def test_a_forged_or_altered_summary_relayed_by_a_peer_is_refused_and_reported(tmp_path):
    (host, _), (master, master_events), (forger, _) = (_service(tmp_path, name) for name in "hmf")
    host.gave(master=master.ledger.node_id, submitter="bob@" + "m" * 32, task_id="a1.0", epoch=1, cpu_seconds=50.0)
    async with open_memory_network(random.Random(1)) as network:
        transports = {name: network.attach((name, 1)) for name in "hmf"}
        for name, service in zip("hmf", (host, master, forger)):
            service.install(transports[name])
        # The master hears the host's own summary first: 50 CPU-s at speed 2 = 100 normalised, pinned to its key.
        await exchange_with(transports["m"], master.ledger, ("h", 1), master.signed_summaries, lambda *a: None)
        now = time.time()
        await master.refresh()   # what fair share reads: the service's copy, as of its last refresh
        usage = master.decayed_usage("bob@" + "m" * 32, now, DAY)
        assert usage == master.ledger.decayed_usage("bob@" + "m" * 32, now, DAY)
        # Read again later (it is summed once per refresh, then decayed as one): still the ledger's figure.
        later = master.decayed_usage("bob@" + "m" * 32, now + DAY, DAY)
        assert abs(later - master.ledger.decayed_usage("bob@" + "m" * 32, now + DAY, DAY)) < 1e-9 * usage
        assert 97.0 < usage <= 100.0   # (hourly buckets: an hour's CPU counts as of the middle of the hour)
        # The forger got the same summary and relays it altered (ten times the giving), and one in the host's
        # name that it signed with its own key.
        genuine = (await host.signed_summaries())[0]
        plain = decode_strict(genuine.body)
        plain["usage"][0]["buckets"] = [[b[0], b[1] * 10] for b in plain["usage"][0]["buckets"]]
        plain["issued_at"] += 1
        altered = dataclasses.replace(genuine, body=encode(plain))
        fake = build_summary(host.ledger.node_id, now + 2, 2.0, {}, [("bob@" + "m" * 32, 5000.0, now)])
        forged = sign_summary(NodeKey.load_or_create(tmp_path / "f.key"), fake)

        async def lies():
            return (altered, forged)

        await exchange_with(transports["f"], forger.ledger, ("m", 1), lies, lambda *a: None)
        await master.refresh()
        assert abs(master.decayed_usage("bob@" + "m" * 32, now, DAY) - usage) < 1.0, "a lie was believed"
        warnings = [e for e in master_events.recent() if e.title == "Forged ledger summary"]
        assert len(warnings) == 2, warnings
        assert any("does not match" in e.message for e in warnings)      # altered: the signature breaks
        assert any("not that node's" in e.message for e in warnings)     # forged: another node's key
    for service in (host, master, forger):
        service.ledger.close()


async def test_runs_ending_milliseconds_apart_are_written_together_and_every_one_is_kept(tmp_path):
    service, _ = _service(tmp_path, "h")
    written: list[int] = []
    record = service.ledger.record

    def counted(runs):
        runs = list(runs)
        written.append(len(runs))
        return record(runs)

    def run(i):
        service.gave(master="m" * 32, submitter="bob@" + "m" * 32, task_id=f"a1.{i}", epoch=1, cpu_seconds=0.01)

    service.ledger.record = counted
    async with open_memory_network(random.Random(1)) as network:
        async with trio.open_nursery() as nursery:
            await nursery.start(service.serve, network.attach(("h", 1)), lambda: [])
            for i in range(50):   # a sweep of tiny units: a run ends every 2 ms
                run(i)
                await trio.sleep(0.002)
            await wait_until(lambda: len(service.ledger.runs()) == 50, timeout=10, what="every run written")
            nursery.cancel_scope.cancel()
    # (A run after a quiet spell is written at once: tests/multinode/test_recovery.py kills a host right after.)
    assert len([n for n in written if n]) <= 6, f"{len(written)} transactions for 50 runs"
    service.ledger.close()
