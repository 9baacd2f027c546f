"""The worked example in docs/plugins.md works as printed, for a stranger following it."""

import re
from pathlib import Path

from frost_core.plugin.api import run_locally
from frost_core.plugin.calls import combine_output, split_units
from frost_core.plugin.registry import PluginRegistry, load_plugin_file
from tests.png_reader import read_png

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def example_source(name: str = "primes.py") -> str:
    found = re.search(rf"<!-- example: {re.escape(name)} -->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert found, f"docs/plugins.md lost its worked example {name}"
    return found.group(1)


def test_example_runs_locally_as_the_doc_shows(tmp_path, monkeypatch):
    (tmp_path / "primes.py").write_text(example_source())
    monkeypatch.chdir(tmp_path)
    out = run_locally(load_plugin_file("primes.py"), {"limit": "10000"})
    assert (out.filename, out.data.decode().splitlines()[0]) == ("primes-below-10000.txt", "1229 primes below 10000")
    assert "primes-below-10000.txt 1229 primes below 10000" in DOC.read_text()


async def test_example_is_accepted_by_the_registry_and_runs_in_workers(tmp_path):
    (tmp_path / "primes.py").write_text(example_source())
    plugins = PluginRegistry(tmp_path / "data", bundled_dir=tmp_path / "none")
    info = await plugins.add_async(tmp_path / "primes.py")
    assert info.ok, info.error
    assert [p.name for p in info.params] == ["limit", "units"]
    units = await split_units(info, {"limit": "100", "units": "2"})
    plugin = load_plugin_file(info.path)
    results = []
    for unit in units:
        state = plugin.start(unit)
        while isinstance(state, dict):
            state = plugin.step(state)
        results.append(state.result)
    output = await combine_output(info, {"limit": 100, "units": 2}, results)
    assert output.data.decode().splitlines()[0] == "25 primes below 100"


def test_the_row_bands_example_draws_its_picture_as_the_doc_says(tmp_path, monkeypatch):
    (tmp_path / "rings.py").write_text(example_source("rings.py"))
    monkeypatch.chdir(tmp_path)
    plugin = load_plugin_file("rings.py")
    assert len(plugin.split({"width": 64, "height": 48, "rows_per_unit": 8, "ring": 6})) == 6
    out = run_locally(plugin, {"width": "64"})
    assert out.filename == "rings-64x48.png" and out.media_type == "image/png"
    width, height, pixels = read_png(out.data)
    assert (width, height) == (64, 48)
    centre = (24 * 64 + 32) * 3
    assert pixels[centre:centre + 3] == bytes((255, 255, 255))  # distance 0: the first ring is light
    assert "`rings-64x48.png`" in DOC.read_text()
