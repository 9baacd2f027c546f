"""Cancelling an assignment on a real node, while its unit runs or while its results combine."""

from tests.plugin_sources import write
from tests.waiting import wait_for


def test_a_cancelled_assignments_guest_stops_and_the_event_log_shows_a_stop_not_an_error(single_node):
    # The unit must be running when the cancel comes, on a machine other tests load: the owner policy stands aside.
    node = single_node('\n[owner]\npolicy = "always"\n')
    submitted = node.call("submit", plugin="montecarlo-pi", params={"samples": 10**12, "units": 1})
    (guest,) = wait_for(lambda: node.call("status")["guests"], timeout=30, what="the unit's guest running")

    node.call("cancel", assignment=submitted["id"])
    wait_for(lambda: not node.call("status")["guests"], timeout=30, what="the cancelled guest to stop")

    about_it = [e for e in node.call("events") if guest["task_id"] in e["message"]]
    assert any(e["kind"] == "stopped" and "was cancelled" in e["message"] for e in about_it), about_it
    assert [e for e in about_it if e["severity"] == "error"] == []
    assert node.call("assignment", assignment=submitted["id"])["state"] == "cancelled"


SLOW_COMBINE = '''
import time

from frost_core import Done, Output, Plugin, WorkUnit

class SlowCombine(Plugin):
    name = "slow-combine"
    version = "1.0"
    description = "one unit, then a combine that takes seconds"
    params = ()

    def split(self, params):
        return [WorkUnit(0, {}, 1024, 1.0)]

    def start(self, unit):
        return {}

    def step(self, state):
        return Done(7)

    def progress(self, state):
        return 0.0

    def combine(self, params, results):
        time.sleep(4)
        return Output(repr(results).encode(), "text/plain", "slow.txt")

plugin = SlowCombine()
'''


def test_an_assignment_cancelled_while_it_combines_drops_its_result_and_the_node_goes_on(single_node, tmp_path):
    # The unit must run on a machine other tests load: the owner policy stands aside.
    node = single_node('\n[owner]\npolicy = "always"\n')
    assert node.cli("plugins", "add", str(write(tmp_path / "slow_combine.py", SLOW_COMBINE))).returncode == 0
    submitted = node.call("submit", plugin="slow-combine", params={})
    wait_for(lambda: node.call("assignment", assignment=submitted["id"])["state"] == "combining", timeout=60,
             what="the assignment combining")

    node.call("cancel", assignment=submitted["id"])
    wait_for(lambda: any(f"assignment {submitted['id']} was cancelled while its results were combined" in e["message"]
                         for e in node.call("events")), timeout=60, what="the combine to end")
    assert node.call("assignment", assignment=submitted["id"])["state"] == "cancelled"
    assert not list((node.data_dir / "results").glob(f"{submitted['id']}*"))
    # The node goes on: its next assignment gets its result.
    assert node.cli("submit", "montecarlo-pi", "--param", "samples=1000", "--param", "units=1", "--wait").returncode == 0
