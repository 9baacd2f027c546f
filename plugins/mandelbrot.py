"""Mandelbrot renderer, after the MINIPROCs demo: bands of rows are the work units, one row
per step, a PNG out. Only + - * / on floats, so every machine computes the same pixels."""

from __future__ import annotations

from frost_core import Done, Output, Param, Plugin, PluginError, WorkUnit, encode_png

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


class Mandelbrot(Plugin):
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

    def split(self, params: dict) -> list[WorkUnit]:
        width, height, band = params["width"], params["height"], params["rows_per_unit"]
        view = {key: params[key] for key in ("width", "height", "max_iter", "center_x", "center_y", "span")}
        units = []
        for index, y0 in enumerate(range(0, height, band)):
            rows = min(band, height - y0)
            units.append(
                WorkUnit(
                    index=index,
                    data={**view, "y0": y0, "y1": y0 + rows},
                    memory_bytes=8 * 1024 * 1024 + rows * width * 3,
                    cost=float(rows * width * params["max_iter"]),
                )
            )
        return units

    def start(self, unit: WorkUnit) -> dict:
        return {**unit.data, "y": unit.data["y0"], "pixels": b""}

    def step(self, state: dict) -> dict | Done:
        row = render_row(state, state["y"])
        state = {**state, "y": state["y"] + 1, "pixels": state["pixels"] + row}
        if state["y"] == state["y1"]:
            return Done({"y0": state["y0"], "rows": state["y1"] - state["y0"], "pixels": state["pixels"]})
        return state

    def progress(self, state: dict) -> float:
        return (state["y"] - state["y0"]) / (state["y1"] - state["y0"])

    def combine(self, params: dict, results: list) -> Output:
        width, height = params["width"], params["height"]
        pixels = join_bands(results, width, height)
        return Output(encode_png(width, height, pixels), "image/png", f"mandelbrot-{width}x{height}.png")


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


def join_bands(results: list, width: int, height: int) -> bytes:
    """Concatenate row bands in unit order, checking that they tile the image exactly."""
    pixels = bytearray()
    for index, result in enumerate(results):
        if not isinstance(result, dict) or not isinstance(result.get("pixels"), bytes):
            raise PluginError(f"result of unit {index} is not a band of pixels")
        if result.get("y0") != len(pixels) // (width * 3) or len(result["pixels"]) != result.get("rows", -1) * width * 3:
            raise PluginError(f"result of unit {index} does not continue the image where unit {index - 1} ended")
        pixels += result["pixels"]
    if len(pixels) != width * height * 3:
        raise PluginError(f"the results cover {len(pixels) // (width * 3)} of {height} rows")
    return bytes(pixels)


plugin = Mandelbrot()
