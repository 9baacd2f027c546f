"""A preview of an image result in half-block characters, which any colour terminal can show.

PNG (8-bit, non-interlaced) and binary PPM are decoded here with the standard library only;
decoding runs in a worker thread so a large image never freezes the UI.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget
from textual.worker import get_current_worker

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_ROWS = 16
"""Text rows a picture takes at most (two pixels a row)."""
_MAX_PIXELS = 16_000_000
_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # PNG colour type -> samples per pixel


class ImageFormatError(ValueError):
    """The file is not an image this preview can decode; the preview says so instead."""


@dataclass(frozen=True)
class Picture:
    width: int
    height: int
    rgb: bytes  # width * height * 3 bytes, row by row


class ImagePreview(Widget):
    """Shows one picture scaled to fit: a file on this machine (`show_file`), or bytes that come later (`expect`, then
    `arrived`: a node on another machine sends them). Each is read and decoded once, whatever the redraws."""

    # A picture takes a share of the height like the tables above it (1fr), at most MAX_ROWS: with a fixed 16 rows
    # it left the Assignments tab's two tables no row at all on a 30-row terminal.
    DEFAULT_CSS = f"""
    ImagePreview {{ height: auto; max-height: {MAX_ROWS}; display: none; }}
    ImagePreview.-shown {{ display: block; }}
    ImagePreview.-picture {{ height: 1fr; }}
    """

    picture: reactive[Picture | None] = reactive(None)
    problem: reactive[str] = reactive("")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.shown: str | None = None
        """What the preview shows: a file's path, or the key `expect` was given; None while hidden."""

    def show_file(self, path: Path) -> None:
        if self._show(str(path)):
            self._decode_in_worker(path.read_bytes)

    def expect(self, key: str) -> bool:
        """Show `key`'s picture once its bytes arrive; False if it is shown (or on its way) already."""
        return self._show(key)

    def arrived(self, key: str, data: bytes | Exception) -> None:
        """The bytes of `key`'s picture, or why there are none; dropped if the preview has moved on meanwhile."""
        if key != self.shown:
            return
        if isinstance(data, Exception):
            self.problem = f"No preview: {data}"
        else:
            self._decode_in_worker(lambda: data)

    def hide(self) -> None:
        self._show(None)

    def _show(self, shown: str | None) -> bool:
        if shown == self.shown:
            return False
        self.shown, self.picture, self.problem = shown, None, ""
        self.set_class(shown is not None, "-shown")
        return shown is not None

    def _decode_in_worker(self, read: Callable[[], bytes]) -> None:
        self.run_worker(lambda: self._decode(read), thread=True, exclusive=True, group="decode")

    def _decode(self, read: Callable[[], bytes]) -> None:
        try:
            picture = decode_image(read())
        except (OSError, ImageFormatError) as error:
            if not get_current_worker().is_cancelled:
                self.app.call_from_thread(setattr, self, "problem", f"No preview: {error}")
            return
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(setattr, self, "picture", picture)

    def watch_picture(self, picture: Picture | None) -> None:
        self.set_class(picture is not None, "-picture")

    def render(self) -> Text:
        if self.picture is None:
            return Text(self.problem or "decoding preview…", style="italic")
        return render_half_blocks(self.picture, max(1, self.size.width), max(1, min(self.size.height, MAX_ROWS)))


def fit(picture: Picture, max_columns: int, max_rows: int) -> tuple[int, int]:
    """Columns and text rows that keep the aspect ratio (a cell holds two pixels stacked)."""
    scale = min(max_columns / picture.width, (max_rows * 2) / picture.height, 1.0)
    return max(1, int(picture.width * scale)), max(1, int(picture.height * scale + 1) // 2)


def render_half_blocks(picture: Picture, max_columns: int, max_rows: int) -> Text:
    columns, rows = fit(picture, max_columns, max_rows)
    out = Text()
    for row in range(rows):
        for col in range(columns):
            top = _pixel(picture, col, row * 2, columns, rows * 2)
            bottom = _pixel(picture, col, row * 2 + 1, columns, rows * 2)
            out.append("▀", Style(color=f"rgb{top}", bgcolor=f"rgb{bottom}"))
        if row < rows - 1:
            out.append("\n")
    return out


def _pixel(picture: Picture, x: int, y: int, columns: int, pixel_rows: int) -> tuple[int, int, int]:
    source_x = min(picture.width - 1, x * picture.width // columns)
    source_y = min(picture.height - 1, y * picture.height // pixel_rows)
    offset = (source_y * picture.width + source_x) * 3
    return tuple(picture.rgb[offset:offset + 3])  # type: ignore[return-value]


def decode_image(data: bytes) -> Picture:
    """Decode PNG or PPM bytes; anything malformed raises ImageFormatError, never another error."""
    try:
        if data.startswith(_PNG_SIGNATURE):
            return _decode_png(data)
        if data.startswith(b"P6"):
            return _decode_ppm(data)
    except (ValueError, IndexError, struct.error, zlib.error) as error:
        if isinstance(error, ImageFormatError):
            raise
        raise ImageFormatError(f"the image is malformed ({error})") from error
    raise ImageFormatError("only PNG and PPM images can be previewed")


def _decode_ppm(data: bytes) -> Picture:
    fields: list[bytes] = []
    position = 2
    while len(fields) < 3:
        while position < len(data) and data[position:position + 1].isspace():
            position += 1
        if data[position:position + 1] == b"#":
            position = data.index(b"\n", position)
            continue
        start = position
        while position < len(data) and not data[position:position + 1].isspace():
            position += 1
        fields.append(data[start:position])
    width, height, maxval = (int(f) for f in fields)
    if maxval != 255 or not 0 < width * height <= _MAX_PIXELS or width <= 0:
        raise ImageFormatError("only 8-bit PPM images of sensible size can be previewed")
    pixels = data[position + 1:position + 1 + width * height * 3]
    if len(pixels) != width * height * 3:
        raise ImageFormatError("the PPM image is truncated")
    return Picture(width, height, pixels)


def _decode_png(data: bytes) -> Picture:
    position = len(_PNG_SIGNATURE)
    header: tuple[int, ...] = ()
    compressed = bytearray()
    while position + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed += body
        elif kind == b"IEND":
            break
    if not header:
        raise ImageFormatError("the PNG has no header")
    width, height, depth, colour, _, _, interlace = header
    if not 0 < width * height <= _MAX_PIXELS:
        raise ImageFormatError(f"a {width}x{height} image is too large to preview")
    if depth != 8 or colour not in _CHANNELS or interlace:
        raise ImageFormatError("only 8-bit, non-interlaced grey/RGB/RGBA PNG images can be previewed")
    channels = _CHANNELS[colour]
    stride = width * channels
    raw = zlib.decompressobj().decompress(bytes(compressed), height * (stride + 1))  # capped: no zip bombs
    rows = _unfilter(raw, stride, height, channels)
    rgb = bytearray()
    for row in rows:
        if channels >= 3:
            for i in range(0, stride, channels):
                rgb += row[i:i + 3]
        else:
            for i in range(0, stride, channels):
                rgb += bytes((row[i],)) * 3
    return Picture(width, height, bytes(rgb))


def _unfilter(raw: bytes, stride: int, height: int, bpp: int) -> list[bytearray]:
    """Undo PNG's per-row filters (none, sub, up, average, Paeth)."""
    if len(raw) < height * (stride + 1):
        raise ImageFormatError("the PNG image data is truncated")
    rows: list[bytearray] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        row = bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                row[i] = (row[i] + row[i - bpp]) & 0xFF
        elif kind == 2:
            for i in range(stride):
                row[i] = (row[i] + previous[i]) & 0xFF
        elif kind == 3:
            for i in range(stride):
                left = row[i - bpp] if i >= bpp else 0
                row[i] = (row[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = row[i - bpp] if i >= bpp else 0
                b = previous[i]
                c = previous[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                predictor = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                row[i] = (row[i] + predictor) & 0xFF
        elif kind != 0:
            raise ImageFormatError(f"the PNG uses an unknown row filter {kind}")
        rows.append(row)
        previous = row
    return rows
