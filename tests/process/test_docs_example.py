"""The worked example in docs/plugins.md works as printed, for a stranger following it."""

import re
from pathlib import Path

from frost_core.plugin.api import run_locally
from frost_core.plugin.calls import combine_output, split_units
from frost_core.plugin.registry import PluginRegistry, load_plugin_file

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


def example_source() -> str:
    found = re.search(r"<!-- example: primes.py -->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert found, "docs/plugins.md lost its worked example"
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
