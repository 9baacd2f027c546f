"""What the screens say is what the node says: units as their hosts report them, one CPU scale, plurals."""

from __future__ import annotations

import dataclasses

from frost_core import GuestView, HostingView
from frost_core.wire.messages import to_plain
from frost_tui import tables
from tests.tui.conftest import run_ui, screen_text
from tests.waiting import wait_in_app


def test_the_cpu_axis_is_percent_of_the_machine_in_every_picture(node):
    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: "CPU, % of the machine" in screen_text(app))
        quiet = tuple(dataclasses.replace(s, owner_cpu_percent=3.0, guest_cpu_percent=1.0)
                      for s in node.snapshot().history)
        node.publish(history=quiet)  # a quiet machine keeps the same axis: 100 % is every core busy
        chart = app.query_one("#chart-cpu")
        await wait_in_app(pilot, lambda: chart.data.series[0].values[-1] == 3.0, timeout=5)
        assert "100%┤" in screen_text(app)

    run_ui(node, scenario)


def test_counts_are_said_in_words(node):
    async def scenario(app, pilot):
        text = screen_text(app)
        assert "4 peers" in text and "3 guests" in text and "1 assignment running" in text
        assert "(s)" not in text.splitlines()[0]

    run_ui(node, scenario)


def test_a_unit_its_host_reports_suspended_is_shown_suspended(node):
    assignment = node.snapshot().assignments[0]
    running = next(i for i, u in enumerate(assignment.units) if u.state == "running")
    units = list(assignment.units)
    units[running] = dataclasses.replace(units[running], reported="suspended", eta_seconds=None)
    node.publish(assignments=(dataclasses.replace(assignment, units=tuple(units)),))

    async def scenario(app, pilot):
        await pilot.press("4")
        await wait_in_app(pilot, lambda: "suspended" in screen_text(app))
        row = next(line for line in screen_text(app).splitlines() if units[running].task_id in line)
        assert "suspended" in row and "running" not in row

    run_ui(node, scenario)


def test_the_machine_tab_shows_every_desk_rule_that_came_after_the_first_picture(node):
    # A node's first snapshot has no owner policy lines yet (nothing measured), later ones do: the facts must not
    # keep the height of the first picture.
    node.publish(hosting=node._hosting(owner=(), sleep="", presence_brief="not read yet"))
    owner = ("run by rule 'quiet': owner not contending [cpu_share 0.2]",
             "temperature: no temperature sensors on this machine: the 90 °C limit cannot act",
             "memory-pool: no input for 75 s: guests together may hold 4096 MiB (guests.memory_pool_mb)")

    async def scenario(app, pilot):
        await wait_in_app(pilot, lambda: "Peers alive" in screen_text(app))
        node.publish(hosting=node._hosting(owner=owner, sleep="sleep not watched: no logind on a system bus"))
        await wait_in_app(pilot, lambda: "Owner policy" in screen_text(app), timeout=5)
        app.query_one("#machine-facts").scroll_end(animate=False)   # the rest is there on a short terminal too
        await wait_in_app(pilot, lambda: "memory-pool:" in screen_text(app), timeout=5)

    run_ui(node, scenario)


def test_a_guest_at_risk_shows_the_cpu_work_an_eviction_would_lose_on_the_screen_and_in_status(node):
    # A guest sharing its CPU: 9 min since its checkpoint, of which it got 2 min of CPU. Evicting it loses 2 min of
    # work, as its details and the evict question say; the column said 9m00s.
    guest = dataclasses.replace(node.snapshot().guests[0], since_checkpoint_seconds=540.0,
                                cpu_since_checkpoint_seconds=120.0)
    node.publish(guests=(guest,))

    async def scenario(app, pilot):
        await pilot.press("2")
        await wait_in_app(pilot, lambda: guest.task_id in screen_text(app))
        row = next(line for line in screen_text(app).splitlines() if guest.task_id in line)
        assert "2m00s" in row and "9m00s" not in row, row

    run_ui(node, scenario)
    hosting = to_plain(HostingView, node.snapshot().hosting)
    status = {"node_id": "n", "name": "turing", "address": "a", "hosting": hosting, "peers": [],
              "guests": [to_plain(GuestView, guest)]}
    row = next(line for line in tables.status(status).splitlines() if guest.task_id in line)
    assert "2m00s" in row and "9m00s" not in row, row
