"""Ledger (tab 8): given vs received per peer and per day, the top givers and this machine's history, at 80x24."""

from __future__ import annotations

from frost_core import ContributorView, LedgerDayView, LedgerPeerView, LedgerView

from frost_tui.tabs.ledger import stretched

from tests.tui.conftest import run_ui, screen_text
from tests.tui.fake_node import FakeNode
from tests.waiting import wait_in_app

LEDGER = LedgerView(
    since=0.0, given=7560.0, received=1800.0,
    peers=(LedgerPeerView("b" * 32, "hopper", 5400.0, 0.0), LedgerPeerView("c" * 32, "lovelace", 2160.0, 1800.0)),
    days=(LedgerDayView("2026-11-24", 3600.0, 600.0), LedgerDayView("2026-11-25", 3960.0, 1200.0)),
    contributors=(ContributorView("d" * 32, "knuth", 86400.0, 100.0, True),
                  ContributorView("a" * 32, "turing", 7560.0, 1800.0, True)),
    history=tuple(float(i % 7) * 60 for i in range(48)), refused=1,
)


def test_the_ledger_tab_shows_given_and_received_per_peer_and_day_and_the_top_givers_at_80x24():
    node = FakeNode()

    async def scenario(app, pilot):
        node.publish(ledger=LEDGER)
        await pilot.press("8")
        await wait_in_app(pilot, lambda: "hopper" in screen_text(app), timeout=10)
        text = screen_text(app)
        assert "Given 2.1h · received 30m · last 30 days · 1 forged summary refused" in text
        assert "8 Ledger" in text and "1 Machine" in text       # the whole tab bar fits 80 columns
        for words in ("hopper    1.5h", "lovelace  36m    30m", "11-25  1.1h   20m", "knuth      1.0d",
                      "CPU given per hour", "-48 h "):   # the history's 48 hours span the chart: its axis says so
            assert words in text, words

    run_ui(node, scenario, size=(80, 24))


def test_hourly_figures_fill_the_chart_in_order_and_a_narrow_chart_shows_the_last_hours():
    assert stretched((1.0, 2.0, 3.0), 7) == ((1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0), 3 * 3600.0 / 7)
    assert stretched((1.0, 2.0, 3.0), 2) == ((2.0, 3.0), 3600.0)
    assert stretched((), 10) == ((), 3600.0)
