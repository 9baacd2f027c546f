"""Heat diffusion on a plate (2-D Jacobi iteration), the bundled gang: one horizontal strip per member.

The plate's top edge is held hot and its other edges cold. Each iteration replaces every inner
cell by the rounded mean of its four neighbours, so a member needs its neighbours' edge rows
(the halo) from the previous iteration: they travel as messages at every superstep. The
arithmetic is on integers (temperatures 0 to 65535), so the plate comes out bit-identical
whatever the number of members and however often the gang moved. The output is a 16-bit PGM.
"""

from __future__ import annotations

import struct

from frost_core import MAX_MEMBERS, GangPlugin, Output, Param, PluginError, Superstep

HOT = 65535  # the top edge; the other edges are 0
MAX_STRIP_CELLS = 500_000
"""The most cells one member updates in one superstep: about 0.25 s of Python on a loaded desk."""


class HeatDiffusion(GangPlugin):
    name = "heat-diffusion"
    version = "1.0"
    description = "Heat spreading from a plate's hot top edge (Jacobi iteration); members exchange strip edges."
    params = (
        Param("height", int, 256, "rows of the plate, its fixed top and bottom edges included", minimum=3, maximum=4096),
        Param("width", int, 256, "columns of the plate, its fixed left and right edges included", minimum=3, maximum=4096),
        Param("members", int, 4, "members of the gang, one strip of rows each", minimum=1, maximum=MAX_MEMBERS),
        Param("iterations", int, 500, "the most iterations to run", minimum=0, maximum=10**7),
        Param("tolerance", int, 0, "stop sooner once an iteration changes no cell by more than this "
              "(0: once nothing changes)", minimum=0, maximum=HOT),
    )

    def members(self, params: dict) -> int:
        height, width, members = params["height"], params["width"], params["members"]
        if members > height:
            raise PluginError(f"members {members} is more than the plate's {height} rows: "
                              "each member needs a strip of at least one row")
        cells = -(-height // members) * width
        if cells > MAX_STRIP_CELLS:
            raise PluginError(f"a strip of {cells} cells is more than one superstep should compute "
                              f"(at most {MAX_STRIP_CELLS}): give more members or a smaller plate")
        return members

    def start(self, params: dict, rank: int, size: int) -> dict:
        height, width = params["height"], params["width"]
        first, end = height * rank // size, height * (rank + 1) // size
        initial = [pack([HOT if y == 0 else 0] * width) for y in range(first - 1, end + 1)]
        return {
            "first": first, "width": width, "height": height,
            "iterations": params["iterations"], "tolerance": params["tolerance"],
            "above": initial[0] if first > 0 else b"",  # the halo: the neighbours' edge rows
            "rows": b"".join(initial[1:-1]),
            "below": initial[-1] if end < height else b"",
            "iteration": 0,  # iterations done
            "change": 0,  # the most any of this strip's cells changed in the last iteration
        }

    def step(self, state: dict, rank: int, size: int, inbox: dict) -> Superstep:
        state = dict(state)
        changes = [state["change"]]
        for sender, (message,) in inbox.items():  # each other member sends one message per superstep
            changes.append(message["change"])
            if "row" in message:
                state["above" if sender < rank else "below"] = message["row"]
        # Every member sees every member's change of the same iteration, so all decide alike.
        if state["iteration"] == state["iterations"] or (state["iteration"] > 0 and max(changes) <= state["tolerance"]):
            return Superstep(state, done=True)
        rows, change = iterate(state)
        edges = {rank - 1: rows[: 2 * state["width"]], rank + 1: rows[-2 * state["width"]:]}
        outbox = {dest: [{"change": change, **({"row": edges[dest]} if dest in edges else {})}]
                  for dest in range(size) if dest != rank}
        return Superstep({**state, "rows": rows, "iteration": state["iteration"] + 1, "change": change}, outbox)

    def finish(self, state: dict, rank: int, size: int) -> dict:
        return {"first": state["first"], "rows": state["rows"], "iterations": state["iteration"]}

    def combine(self, params: dict, results: list) -> Output:
        height, width = params["height"], params["width"]
        plate = bytearray()
        for rank, result in enumerate(results):
            if result["first"] != len(plate) // (2 * width):
                raise PluginError(f"the strip of rank {rank} does not start where rank {rank - 1}'s ended")
            plate += result["rows"]
        if len(plate) != 2 * width * height:
            raise PluginError(f"the strips cover {len(plate) // (2 * width)} of {height} rows")
        cells = unpack(bytes(plate))
        header = f"P5\n# heat diffusion: {results[0]['iterations']} iterations\n{width} {height}\n{HOT}\n".encode()
        return Output(header + struct.pack(f">{len(cells)}H", *cells), "image/x-portable-graymap",
                      f"heat-{width}x{height}.pgm")


def iterate(state: dict) -> tuple[bytes, int]:
    """One Jacobi iteration of a strip: its new rows (packed) and the most any cell changed."""
    width, height, first = state["width"], state["height"], state["first"]
    cells = unpack(state["rows"])
    rows = [cells[i : i + width] for i in range(0, len(cells), width)]
    padded = [unpack(state["above"]) if state["above"] else None, *rows, unpack(state["below"]) if state["below"] else None]
    new_rows = []
    change = 0
    for i, row in enumerate(rows):
        if first + i in (0, height - 1):  # the plate's top and bottom edges stay as they are
            new_rows.append(row)
            continue
        up, down = padded[i], padded[i + 2]
        new = [row[0], *[(up[x] + down[x] + row[x - 1] + row[x + 1] + 2) >> 2 for x in range(1, width - 1)], row[-1]]
        change = max(change, max(abs(a - b) for a, b in zip(new, row)))
        new_rows.append(new)
    return b"".join(pack(row) for row in new_rows), change


def pack(cells: list[int]) -> bytes:
    return struct.pack(f"<{len(cells)}H", *cells)


def unpack(data: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(data) // 2}H", data))


plugin = HeatDiffusion()
