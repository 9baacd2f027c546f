"""Broken plugins give a clear error and leave the node healthy."""

import json
import textwrap

import pytest

from tests.waiting import wait_for

pytestmark = pytest.mark.slow

GOOD_HEAD = textwrap.dedent("""
    from frost_core import Done, Output, Param, Plugin, WorkUnit

    class Endless(Plugin):
        name = "endless"
        version = "1"
        description = "splits fine, validates fine, then loops forever on its second step"
        params = (Param("units", int, 1, "units"),)

        def split(self, params):
            return [WorkUnit(index=i, data={}, memory_bytes=1 << 20, cost=1.0) for i in range(params["units"])]

        def start(self, unit):
            return {"steps": 0}

        def step(self, state):
            if state["steps"] >= 1:
                while True:
                    pass
            return {"steps": state["steps"] + 1}

        def progress(self, state):
            return 0.0

        def combine(self, params, results):
            return Output(b"", "text/plain", "out.txt")

    plugin = Endless()
""")


def test_broken_plugin_files_are_listed_with_their_reason(single_node, tmp_path):
    node = single_node()
    syntax = tmp_path / "syntax_error.py"
    syntax.write_text("def broken(:\n")
    wrong_api = tmp_path / "wrong_api.py"
    wrong_api.write_text("plugin = object()\n")
    for path, reason in ((syntax, "syntax error"), (wrong_api, "plugin")):
        result = node.cli("plugins", "add", str(path), check=False)
        assert result.returncode == 1
        assert "BROKEN" in result.stdout and reason in result.stdout
    listed = json.loads(node.cli("plugins", "--json").stdout)["result"]
    broken = [p for p in listed if not p["ok"]]
    assert len(broken) == 2 and all(p["error"] for p in broken)
    assert {p["name"] for p in listed if p["ok"]} >= {"mandelbrot", "raytrace", "montecarlo-pi"}
    # A gang is listed as working and marked as a gang; one node alone cannot host its 4 members: it waits, saying so.
    assert {p["name"]: p["gang"] for p in listed if p["ok"]}["heat-diffusion"] is True
    assert not any(p["gang"] for p in listed if p["name"] != "heat-diffusion")
    gang = node.call("submit", plugin="heat-diffusion", params={})
    waiting = node.call("assignment", assignment=gang["id"])["gang"]
    assert waiting["phase"] == "waiting" and "needs 4 hosts" in waiting["reason"]
    # Still a working node: it answers, and (the machine's other work may keep it owner-active) nothing hosts.
    assert node.call("status")["state"] in ("idle", "owner-active", "held")


def test_a_step_that_never_returns_fails_the_assignment_with_a_reason(single_node, tmp_path):
    # Not about the owner: the guest must get CPU on a machine busy with other work, which the default
    # `share` policy would rightly keep it from.
    node = single_node('\n[owner]\npolicy = "always"\nmemory_pressure = 100\n[guests]\nstep_timeout = 2\nmax_retries = 1\n')
    path = tmp_path / "endless.py"
    path.write_text(GOOD_HEAD)
    assert node.cli("plugins", "add", str(path)).returncode == 0
    assignment_id = node.cli("submit", "endless").stdout.split()[1].rstrip(":")
    record = wait_for(lambda: (a := node.call("assignment", assignment=assignment_id))["state"] == "failed" and a,
                      timeout=180, what="the endless assignment to fail (CPU time at idle priority)")
    assert "step" in record["error"] or "progress" in record["error"]
    # The node is still healthy and still runs good work.
    node.cli("submit", "montecarlo-pi", "--param", "samples=1000", "--param", "units=1", "--wait")
