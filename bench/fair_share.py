"""Fair share on three real nodes: how much of the cluster a fresh submitter gets against one who just used it all.

Question (issue 17, item 1): Alice has just used the whole cluster for an assignment; then Alice
and Bob (a fresh submitter on another node) submit equal assignments at the same moment, Alice a
few milliseconds first. With fair share on (the default), Bob should get clearly more than half
of the slots and finish first, Alice at most 60 % done by then; with `cluster.fair_share = false`
the slots are shared without memory (`policies.equal_share`: fewest units running first, each host
taking turns), so the two should finish together, each at least 60 % done when the other is done.
Each mode runs on a fresh three-node cluster (one guest CPU
each, the owner policy off: `bench/_nodes.py`), the bundled `montecarlo-pi` plugin. Reported per
mode: each assignment's time from submit to done, Alice's fraction done when Bob's assignment is
done (and Bob's when Alice's is), the later one's fraction done when the first finished (the
"together" figure: 1.0 is a dead heat), and Bob's share of the units that finished while both ran.

Usage: .venv/bin/python bench/fair_share.py [--units 9] [--samples-per-unit 400000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_results  # noqa: E402
from _nodes import start_cluster, stop_all  # noqa: E402

from frost_core import SaveSettings, call_node  # noqa: E402
from tests.waiting import wait_for  # noqa: E402


def done_units(node, assignment_id: str) -> tuple[int, int]:
    units = node.call("assignment", assignment=assignment_id)["units"]
    return sum(u["state"] == "done" for u in units), len(units)


def run_mode(fair: bool, units: int, samples: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="frost-fair-") as folder:
        nodes = start_cluster(Path(folder), ["alice", "bob", "carol"])
        alice, bob, _ = nodes
        try:
            for node in nodes:   # BENCH_CONFIG has its own [cluster] table: the switch goes in as a setting
                call_node(node.paths, SaveSettings(values={"cluster.fair_share": fair}))
            params = {"samples": samples * units, "units": units}
            warm = alice.call("submit", plugin="montecarlo-pi", params=params)["id"]
            wait_for(lambda: done_units(alice, warm)[0] == units, timeout=300, what="Alice's first assignment")
            start = time.monotonic()
            mine = alice.call("submit", plugin="montecarlo-pi", params=params)["id"]
            theirs = bob.call("submit", plugin="montecarlo-pi", params=params)["id"]
            finished: dict[str, float] = {}
            other_then: dict[str, float] = {}
            bob_share = None
            while len(finished) < 2 and time.monotonic() - start < 600:
                a, b = done_units(alice, mine)[0], done_units(bob, theirs)[0]
                now = time.monotonic() - start
                for name, count, other in (("alice", a, b), ("bob", b, a)):
                    if count == units and name not in finished:
                        finished[name] = now
                        other_then[name] = other / units
                        if bob_share is None:
                            bob_share = b / (a + b)
                time.sleep(0.1)
        finally:
            stop_all(nodes)
    return {"fair_share": fair, "alice_seconds": finished.get("alice"), "bob_seconds": finished.get("bob"),
            "alice_done_when_bob_done": other_then.get("bob"), "bob_done_when_alice_done": other_then.get("alice"),
            "bob_share_until_first_done": bob_share,
            "other_done_at_first_end": min(other_then.values()) if len(other_then) == 2 else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=9)
    parser.add_argument("--samples-per-unit", type=int, default=400_000)
    args = parser.parse_args()
    results = [run_mode(fair, args.units, args.samples_per_unit) for fair in (True, False)]
    print_table(["fair share", "Alice s", "Bob s", "Alice done at Bob's end", "Bob done at Alice's end",
                 "other done at first end", "Bob's share"],
                [["on" if r["fair_share"] else "off", r["alice_seconds"], r["bob_seconds"],
                  r["alice_done_when_bob_done"], r["bob_done_when_alice_done"],
                  r["other_done_at_first_end"], r["bob_share_until_first_done"]]
                 for r in results])
    write_results("fair_share", {"units": args.units, "samples_per_unit": args.samples_per_unit, "runs": results})


if __name__ == "__main__":
    main()
