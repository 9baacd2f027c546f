"""Cancelling a running assignment on a real node: its guest stops, and the owner is not told it failed."""

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
