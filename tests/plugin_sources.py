"""A small valid plugin's source, and writing plugin files: shared by the registry, calls, archive and shipping tests."""

import textwrap
from pathlib import Path

GOOD = '''
from frost_core import Done, Output, Param, Plugin, WorkUnit

class Squares(Plugin):
    name = "{name}"
    version = "{version}"
    description = "squares numbers"
    params = (Param("count", int, 3, minimum=1),)

    def split(self, params):
        return [WorkUnit(i, {{"x": i}}, 1024, 1.0) for i in range(params["count"])]

    def start(self, unit):
        return {{"x": unit.data["x"]}}

    def step(self, state):
        return Done(state["x"] ** 2)

    def progress(self, state):
        return 0.0

    def combine(self, params, results):
        return Output(repr(results).encode(), "text/plain", "squares.txt")
{tail}
plugin = Squares()
'''


def good_source(name: str = "squares", version: str = "1.0", tail: str = "") -> str:
    return GOOD.format(name=name, version=version, tail=tail)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path
