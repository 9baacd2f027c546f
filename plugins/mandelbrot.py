"""Mandelbrot renderer, after the MINIPROCs demo: bands of rows are the work units, one row
per step, a PNG out. Only + - * / on floats, so every machine computes the same pixels."""

from __future__ import annotations

from frost_core import Param, RowBands

# The well-known 16-colour "Ultra Fractal" gradient, indexed by escape count.
PALETTE = bytes(
    c
    for rgb in (
        (66, 30, 15), (25, 7, 26), (9, 1, 47), (4, 4, 73), (0, 7, 100), (12, 44, 138),
        (24, 82, 177), (57, 125, 209), (134, 181, 229), (211, 236, 248), (241, 233, 191),
        (248, 201, 95), (255, 170, 0), (204, 128, 0), (153, 87, 0), (106, 52, 3),
    )
    for c in rgb
)
INSIDE = b"\x00\x00\x00"


class Mandelbrot(RowBands):
    name = "mandelbrot"
    version = "1.0"
    description = "Renders the Mandelbrot set to a PNG; each unit is a band of rows."
    params = (
        Param("width", int, 800, "image width in pixels", minimum=1, maximum=16384),
        Param("height", int, 600, "image height in pixels", minimum=1, maximum=16384),
        Param("max_iter", int, 256, "iterations before a point counts as inside", minimum=1, maximum=1_000_000),
        Param("rows_per_unit", int, 16, "rows in one work unit", minimum=1, maximum=16384),
        Param("center_x", float, -0.6, "real part of the image centre"),
        Param("center_y", float, 0.0, "imaginary part of the image centre"),
        Param("span", float, 3.2, "width of the view in the complex plane", minimum=1e-12, maximum=100.0),
    )

    view_params = ("width", "height", "max_iter", "center_x", "center_y", "span")
    image_name = "mandelbrot"

    def row_cost(self, params: dict) -> float:
        return float(params["width"] * params["max_iter"])

    def render_row(self, view: dict, y: int) -> bytes:
        return render_row(view, y)


def render_row(view: dict, y: int) -> bytes:
    """Escape-count colours of one row; points in the main cardioid or bulb skip iterating."""
    width, max_iter = view["width"], view["max_iter"]
    scale = view["span"] / width
    ci = view["center_y"] - (y + 0.5 - view["height"] * 0.5) * scale
    left = view["center_x"] - width * 0.5 * scale
    out = bytearray()
    for x in range(width):
        cr = left + (x + 0.5) * scale
        q = (cr - 0.25) * (cr - 0.25) + ci * ci
        if q * (q + (cr - 0.25)) <= 0.25 * ci * ci or (cr + 1.0) * (cr + 1.0) + ci * ci <= 0.0625:
            out += INSIDE
            continue
        zr = zi = 0.0
        n = 0
        while n < max_iter:
            zr2, zi2 = zr * zr, zi * zi
            if zr2 + zi2 > 4.0:
                break
            zi = 2.0 * zr * zi + ci
            zr = zr2 - zi2 + cr
            n += 1
        if n == max_iter:
            out += INSIDE
        else:
            k = (n % 16) * 3
            out += PALETTE[k : k + 3]
    return bytes(out)


plugin = Mandelbrot()
