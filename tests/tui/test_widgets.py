"""The UI's pure pieces: number formatting, the braille chart, the image decoder, table syncing."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.text import Text

from frost_tui.widgets.chart import ChartData, Series, render_chart
from frost_tui.widgets.footer import FooterEntry, fit_keys
from frost_tui.widgets.format import format_bytes, format_duration, progress_bar, sparkline
from frost_tui.widgets.image_preview import ImageFormatError, decode_image, render_half_blocks
from tests.png_reader import make_png


def test_durations_read_like_a_clock():
    assert [format_duration(s) for s in (0, 42, 185, 7620, 273600)] == ["0s", "42s", "3m05s", "2h07m", "3d04h"]
    assert format_duration(None) == "—"


def test_a_narrow_footer_words_keys_shorter_then_leaves_out_the_highest_ranks_last_first_never_rank_0():
    keys = [FooterEntry("q", "Quit", "Quit", 0), FooterEntry("p", "Pause/resume", "Pause", 1),
            FooterEntry("f", "Finish+pause", "Finish", 2), FooterEntry("m", "Move", "Move", 2),
            FooterEntry("^p", "palette", "palette", 3)]
    assert fit_keys(keys, 200) == [(0, "Quit"), (1, "Pause/resume"), (2, "Finish+pause"), (3, "Move"), (4, "palette")]
    assert fit_keys(keys, 50) == [(0, "Quit"), (1, "Pause"), (2, "Finish"), (3, "Move"), (4, "palette")]
    assert fit_keys(keys, 35) == [(0, "Quit"), (1, "Pause"), (2, "Finish"), (3, "Move")]  # the palette goes first
    assert fit_keys(keys, 34) == [(0, "Quit"), (1, "Pause"), (2, "Finish")]    # then the later of rank 2
    assert fit_keys(keys, 3) == [(0, "Quit")]                                  # what must stay stays, even cut


def test_bytes_use_binary_units():
    assert [format_bytes(n) for n in (512, 1536, 3 * 1024**3)] == ["512 B", "1.5 KiB", "3 GiB"]


def test_a_sparkline_is_a_share_of_its_top_per_character():
    assert sparkline([0.0, 0.45, 0.9, 2.0, -1.0], top=0.9) == "▁▅██▁"
    assert sparkline([1.0, 2.0], top=0.0) == "▁▁"
    assert sparkline([None, 0.9, None], top=0.9) == " █ "     # minutes nobody looked at stay blank
    assert sparkline([], top=1.0) == ""


def test_progress_bar_is_clamped_and_shows_percent():
    assert progress_bar(0.5, width=10).plain == "█████░░░░░  50%"
    assert progress_bar(1.7, width=4).plain == "████ 100%"


def test_chart_puts_now_at_the_right_edge_and_labels_the_axis():
    # 23 plot cells hold 46 samples, 5 s apart: the axis spans 230 s, though only 3 samples exist yet.
    data = ChartData("CPU", "%", (Series("owner", "yellow", (0.0, 50.0, 100.0)),), seconds_per_dot=5)
    lines = render_chart(data, 30, 6).plain.splitlines()
    assert lines[0].startswith("CPU")
    assert lines[1].strip().startswith("100%┤")
    assert lines[-1].strip().startswith("-4 min") and lines[-1].endswith("now")
    assert lines[1].rstrip()[-1] != " "  # the newest (highest) sample is drawn in the last column


def test_a_chart_half_as_wide_as_80_columns_names_every_line_in_its_legend():
    """At 80x24 the Machine tab's charts are 36 columns wide: the legend lost its last label ("━ g") before."""
    cpu = ChartData("CPU, % of the machine", "%", (Series("owner", "yellow", (1.0,)), Series("guests", "cyan", (2.0,))),
                    short_title="CPU %")
    available = ChartData("Available", "", (Series("available (speed units)", "green", (1.0,)),))
    assert render_chart(cpu, 36, 6).plain.splitlines()[0].rstrip() == "CPU %   ━ owner  ━ guests"
    assert render_chart(available, 36, 6).plain.splitlines()[0].rstrip() == "Available   ━ available"
    assert render_chart(cpu, 60, 6).plain.splitlines()[0].rstrip() == "CPU, % of the machine   ━ owner  ━ guests"
    assert render_chart(available, 60, 6).plain.splitlines()[0].rstrip() == "Available   ━ available (speed units)"


def test_png_decodes_to_the_pixels_written():
    picture = decode_image(make_png(5, 3))
    assert (picture.width, picture.height) == (5, 3)
    assert picture.rgb[3 * (1 * 5 + 2):3 * (1 * 5 + 2) + 3] == bytes((80, 60, 128))


def test_png_up_filter_is_undone():
    assert decode_image(make_png(4, 4, filter_type=2)) == decode_image(make_png(4, 4))


def test_ppm_decodes_and_renders_as_half_blocks():
    picture = decode_image(b"P6\n# made by hand\n2 2\n255\n" + bytes(range(12)))
    text = render_half_blocks(picture, 10, 5)
    assert text.plain == "▀▀"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([b"", b"\x89PNG\r\n\x1a\n", b"P6 "]))
def test_any_bytes_decode_or_raise_image_format_error(body, prefix):
    try:
        decode_image(prefix + body)
    except ImageFormatError:
        pass


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.binary(max_size=64))
def test_png_with_any_header_is_refused_or_decoded(width, height, data):
    png = make_png(2, 2)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    broken = png[:16] + header + png[29:33] + png[33:33] + data
    try:
        decode_image(broken)
    except ImageFormatError:
        pass


def test_history_slices_change_only_when_one_completes():
    from frost_core.api.snapshot import ResourceSample
    from frost_tui.tabs.machine import bucket_history

    def history(end: int) -> tuple[ResourceSample, ...]:  # ten minutes of one-second samples ending at `end`
        return tuple(ResourceSample(at=float(t), available=t % 7 / 7, owner_cpu_percent=t % 50, guest_cpu_percent=100)
                     for t in range(end - 599, end + 1))

    shown = [bucket_history(history(end), 4) for end in range(1000, 1009)]
    changes = [end for end, (a, b) in zip(range(1001, 1009), zip(shown, shown[1:])) if a != b]
    assert changes == [1004, 1008]  # once per four-second slice, not once per sample
    slices = shown[0]
    assert slices[-1].at == 996 and slices[-1].owner_cpu_percent == (46 + 47 + 48 + 49) / 4  # 996..999, finished
    assert len(slices) == 148 and slices[0].at >= 1000 - 599  # the oldest, partial slice is left out


def test_live_table_keeps_the_cursor_on_its_row_and_updates_cells_in_place():
    import asyncio

    from textual.app import App

    from frost_tui.widgets.live_table import LiveTable

    class TableApp(App):
        def compose(self):
            yield LiveTable("Name", "State", id="table")

    async def main():
        app = TableApp()
        async with app.run_test(size=(40, 10)) as pilot:
            table = app.query_one(LiveTable)
            table.show_rows([("a", ("ada", "alive")), ("b", ("babbage", "alive")), ("c", ("curie", "alive"))])
            await pilot.pause()
            table.focus()
            await pilot.press("down")
            assert table.selected_key() == "b"
            table.show_rows([("c", ("curie", "alive")), ("b", ("babbage", Text("dead", style="red"))),
                             ("a", ("ada", "alive"))])
            await pilot.pause()
            assert table.selected_key() == "b" and table.cursor_row == 1
            assert table.row_text("b") == ("babbage", "dead")
            table.show_rows([("c", ("curie", "alive"))])
            await pilot.pause()
            assert table.selected_key() == "c"
            table.show_rows([])
            await pilot.pause()
            assert table.selected_key() is None

    asyncio.run(main())


def test_the_machine_tab_shows_each_guest_isolation_layer_and_the_warning():
    import dataclasses

    from rich.console import Console

    from frost_tui.shots.fixed import demo_snapshot
    from frost_tui.tabs.machine import describe_facts

    snapshot = demo_snapshot()
    lines = ("cgroups: v1 (cpu, memory)", "files: Landlock ABI 7", "network: own namespace, no interfaces up",
             "user: uid 0 (root)", "warning: guests run with less isolation than this product intends: user: ...")
    hosting = dataclasses.replace(snapshot.hosting, isolation=lines)
    console = Console(width=160, record=True)
    console.print(describe_facts(hosting, snapshot))
    text = console.export_text()
    assert "Guest isolation" in text
    for line in lines:
        assert line[:40] in text
