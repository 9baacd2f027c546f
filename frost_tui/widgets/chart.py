"""A braille line chart of a few series sharing one y axis: the machine's recent history."""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

# Dot bits of a braille cell (U+2800 + bits), indexed [row 0..3][column 0..1].
_DOTS = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
_AXIS_WIDTH = 7


@dataclass(frozen=True)
class Series:
    label: str
    color: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class ChartData:
    """Everything one chart draws; frozen so an unchanged chart is recognised and not redrawn."""

    title: str
    unit: str
    series: tuple[Series, ...]
    seconds_per_dot: float = 1.0
    """Time between two samples: the time axis spans the chart's full width at this pace."""
    top: float | None = None
    """A fixed top of the y axis (100 for percent of the machine); None: a round figure above the data."""
    short_title: str = ""
    """The title where the whole one and the legend do not fit on the line (half of an 80-column terminal)."""


class Chart(Widget):
    """Plots the newest samples that fit, right-aligned so 'now' is always at the right edge.

    Drawn line by line from strips made straight from the chart's styled runs: going through
    `render()` sent two full-screen-wide charts through Textual's text layout on every sample,
    the largest cost of the idle This machine tab.
    """

    DEFAULT_CSS = """
    Chart { height: 8; }
    """

    data: reactive[ChartData | None] = reactive(None)

    _cached_key: tuple | None = None
    _lines: list[Strip] = []

    def render_lines(self, crop: Region) -> list[Strip]:
        # The widget's style once per paint: deriving it walks every ancestor.
        width, height = self.size
        base = self.rich_style
        key = (self.data, width, height, base)
        if key != self._cached_key:
            self._cached_key = key
            styles: dict[str, Style] = {"": base}
            lines = []
            for runs in chart_lines(self.data, width, height):
                segments = []
                for text, style_name in runs:
                    if style_name not in styles:
                        styles[style_name] = base + Style.parse(style_name)
                    segments.append(Segment(text, styles[style_name]))
                lines.append(Strip(segments).crop_extend(0, width, base))
            self._lines = lines + [Strip.blank(width, base)] * (height - len(lines))
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        return self._lines[y] if y < len(self._lines) else Strip.blank(self.size.width)


def plot_dots(width: int) -> int:
    """How many samples a chart `width` cells wide can draw side by side (two dots a cell)."""
    return max(0, width - _AXIS_WIDTH) * 2


Run = tuple[str, str]  # text and its style name ("" for none)


def render_chart(data: ChartData | None, width: int, height: int) -> Text:
    """The chart as one Text, for tests and anything else that wants a renderable."""
    out = Text()
    for number, runs in enumerate(chart_lines(data, width, height)):
        if number:
            out.append("\n")
        for text, style in runs:
            out.append(text, style=style)
    return out


def title_line(data: ChartData, width: int) -> list[Run]:
    """The title and a legend entry per line; where that is wider than the chart, the short title, then the labels
    without what their brackets add: the legend says which colour is which before the title says more."""
    labels = [series.label for series in data.series]
    bare = [label.split(" (")[0] for label in labels]
    short = data.short_title or data.title
    for title, names in ((data.title, labels), (data.title, bare), (short, bare)):
        line: list[Run] = [(f"{title} ", "bold"), ("  ", "")]
        line += [(f"━ {name}  ", series.color) for name, series in zip(names, data.series)]
        if sum(len(text) for text, _ in line) - 2 <= width:  # (the last entry's two spaces may fall off)
            break
    return line


def chart_lines(data: ChartData | None, width: int, height: int) -> list[list[Run]]:
    """Pure rendering into styled runs per line, so tests and the widget agree byte for byte."""
    if data is None or width <= _AXIS_WIDTH + 2 or height < 3:
        return []
    plot_width = width - _AXIS_WIDTH
    plot_height = height - 2  # a title line and a time-axis line
    top = data.top or _nice_ceiling(max([1.0] + [v for s in data.series for v in s.values]))
    lines = [title_line(data, width)]
    cells = [[0] * plot_width for _ in range(plot_height)]
    colors: list[list[str | None]] = [[None] * plot_width for _ in range(plot_height)]
    dots_high = plot_height * 4
    for series in data.series:
        values = series.values[-plot_width * 2:]
        offset = plot_width * 2 - len(values)
        previous: int | None = None
        for i, value in enumerate(values):
            x = offset + i
            y = min(dots_high - 1, max(0, int(round(value / top * (dots_high - 1)))))
            low, high = (y, y) if previous is None else (min(y, previous), max(y, previous))
            for dot_y in range(low, high + 1):
                row_from_top = dots_high - 1 - dot_y
                cell_row, dot_row = divmod(row_from_top, 4)
                cell_col, dot_col = divmod(x, 2)
                cells[cell_row][cell_col] |= _DOTS[dot_row][dot_col]
                colors[cell_row][cell_col] = series.color
            previous = y
    for row in range(plot_height):
        label = ""
        if row == 0:
            label = _axis_label(top, data.unit)
        elif row == plot_height - 1:
            label = _axis_label(0, data.unit)
        line: list[Run] = [(label.rjust(_AXIS_WIDTH - 1) + "┤", "bright_black")]
        run: list[str] = []
        run_color = ""
        for col in range(plot_width):  # one run per stretch of one colour: a chart is redrawn often
            bits = cells[row][col]
            color = (colors[row][col] or "") if bits else ""
            if color != run_color and run:
                line.append(("".join(run), run_color))
                run = []
            run_color = color
            run.append(chr(0x2800 + bits) if bits else " ")
        if run:
            line.append(("".join(run), run_color))
        lines.append(line)
    span = plot_width * 2 * data.seconds_per_dot  # the left edge, however few samples there are yet
    left = f"-{span / 3600:.0f} h" if span >= 7200 else f"-{span / 60:.0f} min" if span >= 60 else f"-{span:.0f} s"
    lines.append([(" " * _AXIS_WIDTH + left + "now".rjust(plot_width - len(left)), "bright_black")])
    return lines


def _nice_ceiling(value: float) -> float:
    """Round an axis maximum up to 1, 2 or 5 times a power of ten, so labels stay readable."""
    magnitude = 1.0
    while magnitude * 10 <= value:
        magnitude *= 10
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude


def _axis_label(value: float, unit: str) -> str:
    return f"{value:g}{unit}"
