"""The plugin registry: bundled, entry-point and added plugins; broken ones listed, never fatal."""

import json
from pathlib import Path

import pytest
import trio

from frost_core.api.errors import PluginError
from frost_core.node.views import plugin_views
from frost_core.plugin.api import MAX_STATE_BYTES
from frost_core.plugin.registry import PluginRegistry, content_hash, load_plugin_file
from tests.plugin_sources import good_source, write

GANG_SOURCE = """
from frost_core import GangPlugin, Output, Superstep

class Pair(GangPlugin):
    name = "pair"
    version = "1"

    def members(self, params):
        return 2

    def start(self, params, rank, size):
        return rank

    def step(self, state, rank, size, inbox):
        return Superstep(state, {rank + 1: [rank]})

    def finish(self, state, rank, size):
        return state

    def combine(self, params, results):
        return Output(bytes(results), "application/octet-stream", "pair.bin")

plugin = Pair()
"""

# name -> (source, words the error must contain)
BROKEN = {
    "syntax": ("def broken(:\n", ["syntax.py:1: syntax error"]),
    "missing_import": ("import frost_no_such_module\n", ["ModuleNotFoundError", "frost_no_such_module"]),
    "raises": ("raise RuntimeError('boom at import')\n", ["importing raised RuntimeError: boom at import", "raises.py:1"]),
    "exits": ("import sys\nsys.exit(3)\n", ["importing raised SystemExit"]),
    "no_plugin": (good_source().replace("plugin = Squares()", ""), ["no module-level `plugin`"]),
    "not_a_plugin": ("plugin = object()\n", ["not an instance of frost_core.plugin.api.Plugin"]),
    "missing_step": (
        good_source().replace("def step(self, state)", "def stepp(self, state)"),
        ["Can't instantiate abstract class Squares", "step"],
    ),
    "bad_param": (good_source().replace('Param("count", int, 3, minimum=1)', 'Param("count", int, 0, minimum=1)'), ["parameter 'count'", "below the minimum 1"]),
    "unnamed": (good_source(name=""), ["name must be a non-empty string"]),
    "split_empty": (good_source().replace('range(params["count"])', "range(0)"), ["split must return a non-empty list"]),
    "state_not_cbor": (good_source().replace('return {"x": unit.data["x"]}', 'return {"x": {1, 2}}'), ["state returned by start holds a set"]),
    "huge_state": (good_source().replace('return {"x": unit.data["x"]}', f'return {{"x": bytes({MAX_STATE_BYTES + 1})}}'), ["state returned by start is", "over the limit"]),
    "step_loops": (good_source().replace('return Done(state["x"] ** 2)', "while True:\n            pass"), ["step did not finish within"]),
    "bad_progress": (good_source().replace("return 0.0", "return 7"), ["progress must return a number in [0, 1], not 7"]),
    "gang_bad_rank": (GANG_SOURCE.replace("{rank + 1: [rank]}", "{size: [rank]}"),
                      ["superstep 0: rank 0 sent to rank 2, but the ranks of this gang are 0 to 1"]),
}


@pytest.fixture
def no_bundled(tmp_path):
    return (tmp_path / "no-bundled").resolve()


def registry(tmp_path: Path, bundled_dir: Path | None = None) -> PluginRegistry:
    return PluginRegistry(tmp_path / "data", timeout=4.0, bundled_dir=bundled_dir)


async def test_bundled_plugins_are_listed_working(tmp_path):
    infos = {info.name: info for info in await registry(tmp_path).scan_async()}
    assert {"raytrace", "mandelbrot", "montecarlo-pi"} <= set(infos)
    for name in ("raytrace", "mandelbrot", "montecarlo-pi"):
        info = infos[name]
        assert info.ok and info.error is None and info.source == "bundled"
        assert info.hash == content_hash(info.path) and len(info.hash) == 64
        assert info.version and info.description and info.params
    assert {p.name for p in infos["raytrace"].params} >= {"width", "height", "rows_per_unit", "max_depth"}
    assert infos["heat-diffusion"].ok and infos["heat-diffusion"].gang and not infos["raytrace"].gang
    assert infos["heat-diffusion"].to_plain()["gang"] is True  # what `frost-tui plugins --json` shows


async def test_broken_plugins_are_listed_with_file_and_reason_while_others_load(tmp_path):
    folder = tmp_path / "plugins"
    for name, (source, _) in BROKEN.items():
        write(folder / f"{name}.py", source)
    write(folder / "good.py", good_source())
    write(folder / "_private.py", "raise RuntimeError('never loaded')\n")
    infos = {Path(info.path).stem: info for info in await registry(tmp_path, folder).scan_async()}
    assert set(infos) == {*BROKEN, "good"}
    assert infos["good"].ok and infos["good"].name == "squares"
    for name, (_, words) in BROKEN.items():
        info = infos[name]
        assert not info.ok, name
        assert info.path == str(folder / f"{name}.py")
        for word in words:
            assert word in info.error, (name, info.error)


async def test_plugin_output_on_stdout_does_not_break_validation(tmp_path, no_bundled):
    plugin = write(tmp_path / "chatty.py", "print('hello from import')\n" + good_source(tail="print('more')"))
    info = await registry(tmp_path, no_bundled).add_async(plugin)
    assert info.ok, info.error


async def test_add_copies_a_file_keeps_it_and_lists_it_after_a_restart(tmp_path, no_bundled):
    source = write(tmp_path / "mine" / "squares.py", good_source())
    first = registry(tmp_path, no_bundled)
    info = await first.add_async(source)
    assert info.ok and info.source == "added" and info.name == "squares"
    assert Path(info.path).parent == tmp_path / "data" / "plugins"
    assert info.hash == content_hash(source) == content_hash(info.path)
    source.write_text(good_source(version="2.0"))  # editing the original changes nothing added
    again = await registry(tmp_path, no_bundled).scan_async()
    assert [(i.name, i.version, i.hash, i.ok) for i in again] == [("squares", "1.0", info.hash, True)]


async def test_add_copies_a_folder_with_relative_imports(tmp_path, no_bundled):
    folder = tmp_path / "geometry"
    write(folder / "helper.py", "NAME = 'geometry'\n")
    write(folder / "__init__.py", "from .helper import NAME\n" + good_source().replace('name = "squares"', "name = NAME"))
    before = content_hash(folder)
    write(folder / "__pycache__" / "helper.cpython-311.pyc", "junk")  # importing writes these
    assert content_hash(folder) == before
    info = await registry(tmp_path, no_bundled).add_async(folder)
    assert info.ok, info.error
    assert info.name == "geometry" and info.hash == before
    assert Path(info.path).is_dir() and not (Path(info.path) / "__pycache__").exists()


async def test_folder_hash_covers_names_and_contents(tmp_path):
    write(tmp_path / "a" / "__init__.py", "x = 1\n")
    write(tmp_path / "b" / "__init__.py", "x = 2\n")
    write(tmp_path / "c" / "init.py", "x = 1\n")
    hashes = {content_hash(tmp_path / name) for name in "abc"}
    assert len(hashes) == 3


async def test_add_refuses_what_is_not_a_plugin(tmp_path, no_bundled):
    plugins = registry(tmp_path, no_bundled)
    with pytest.raises(PluginError, match="no such plugin file or folder"):
        await plugins.add_async(tmp_path / "missing.py")
    with pytest.raises(PluginError, match="must be a .py file"):
        await plugins.add_async(write(tmp_path / "notes.txt", "hi"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(PluginError, match="needs an __init__.py"):
        await plugins.add_async(tmp_path / "empty")


async def test_re_adding_a_fixed_plugin_replaces_its_broken_copy(tmp_path, no_bundled):
    source = write(tmp_path / "squares.py", BROKEN["missing_step"][0])
    plugins = registry(tmp_path, no_bundled)
    broken = await plugins.add_async(source)
    assert not broken.ok and "abstract" in broken.error
    assert [i.ok for i in plugins.plugins()] == [False]  # listed, so the owner sees why
    source.write_text(good_source())
    fixed = await plugins.add_async(source)
    assert fixed.ok
    assert [(i.name, i.ok) for i in plugins.plugins()] == [("squares", True)]
    assert not Path(broken.path).exists()


async def test_get_prefers_added_then_installed_then_bundled(tmp_path):
    plugins = registry(tmp_path)
    await plugins.scan_async()
    assert plugins.get("mandelbrot").source == "bundled"
    mine = await plugins.add_async(write(tmp_path / "m.py", good_source(name="mandelbrot", version="9")))
    assert plugins.get("mandelbrot") == mine
    newer = await plugins.add_async(write(tmp_path / "m2.py", good_source(name="mandelbrot", version="10")))
    assert plugins.get("mandelbrot") == newer
    assert plugins.by_hash(mine.hash) == mine  # older code stays runnable by hash
    # The list says which copy `submit mandelbrot` runs: the others are marked with its hash.
    listed = {(view.source, view.version): view.superseded_by for view in plugin_views(plugins.plugins())
              if view.name == "mandelbrot"}
    assert listed == {("bundled", "1.0"): newer.hash, ("added", "9"): newer.hash, ("added", "10"): ""}


async def test_get_and_by_hash_explain_unknown_and_broken_plugins(tmp_path, no_bundled):
    plugins = registry(tmp_path, no_bundled)
    with pytest.raises(PluginError, match="not been scanned yet"):
        plugins.get("squares")
    good = await plugins.add_async(write(tmp_path / "squares.py", good_source()))
    broken = await plugins.add_async(write(tmp_path / "bad.py", good_source(name="bad").replace("return 0.0", "return 2")))
    assert plugins.get("squares") == good
    with pytest.raises(PluginError, match=r"unknown plugin 'cubes' \(available: squares\)"):
        plugins.get("cubes")
    with pytest.raises(PluginError, match="plugin 'bad' is broken: .*progress must return"):
        plugins.get("bad")
    with pytest.raises(PluginError, match="is broken"):
        plugins.by_hash(broken.hash)
    with pytest.raises(PluginError, match="no plugin with code hash 000000000000"):
        plugins.by_hash("0" * 64)


def test_blocking_scan_and_json_form_for_the_cli(tmp_path, no_bundled):
    plugins = registry(tmp_path, no_bundled)
    info = plugins.add(write(tmp_path / "squares.py", good_source()))
    assert plugins.get("squares") == info
    listed = json.loads(json.dumps([i.to_plain() for i in plugins.scan()]))
    assert listed[0]["name"] == "squares" and listed[0]["ok"] is True and listed[0]["error"] is None
    assert {"name", "version", "hash", "source", "ok", "error"} <= set(listed[0])
    assert listed[0]["params"][0] == {"name": "count", "kind": "int", "default": 3, "help": "", "minimum": 1, "maximum": None, "choices": None}


async def test_validation_verdicts_are_cached_by_hash_across_restarts(tmp_path, no_bundled):
    imports = tmp_path / "imports.log"
    source = write(tmp_path / "counted.py", f"open({str(imports)!r}, 'a').write('imported\\n')\n" + good_source())
    await registry(tmp_path, no_bundled).add_async(source)
    assert imports.read_text().count("imported") == 1
    for _ in range(2):  # restarts: the plugin's code is not run again
        infos = await registry(tmp_path, no_bundled).scan_async()
        assert [i.ok for i in infos] == [True]
    assert imports.read_text().count("imported") == 1


async def test_a_timeout_is_not_cached(tmp_path, no_bundled):
    folder = tmp_path / "plugins"
    write(folder / "slow.py", good_source(tail="import time\ntime.sleep(float(open(__file__ + '.delay').read()))"))
    (folder / "slow.py.delay").write_text("30")
    plugins = PluginRegistry(tmp_path / "data", timeout=1.0, bundled_dir=folder)
    [first] = await plugins.scan_async()
    assert not first.ok and "import did not finish within 1 s" in first.error
    (folder / "slow.py.delay").write_text("0")  # the machine was just busy
    [second] = await plugins.scan_async()
    assert second.ok, second.error


def make_distribution(site: Path) -> None:
    """An installed-like distribution: a dist-info with entry points, next to its modules."""
    write(site / "frost_test_ep_plugin.py", good_source(name="ep-squares"))
    write(site / "frost_test_pkg" / "__init__.py", "raise RuntimeError('the node must not import this package')\n")
    write(site / "frost_test_pkg" / "cubes.py", good_source(name="ep-cubes"))
    info = site / "frost_test_ep-1.0.dist-info"
    write(info / "METADATA", "Metadata-Version: 2.1\nName: frost-test-ep\nVersion: 1.0\n")
    write(
        info / "entry_points.txt",
        "[frost_tui.plugins]\n"
        "squares = frost_test_ep_plugin\n"
        "cubes = frost_test_pkg.cubes\n"
        "attr = frost_test_ep_plugin:plugin\n"
        "missing = frost_test_nowhere\n",
    )


async def test_entry_point_plugins_are_found_without_importing_them(tmp_path, no_bundled, monkeypatch):
    site = tmp_path / "site"
    make_distribution(site)
    monkeypatch.syspath_prepend(str(site))
    infos = {info.path and Path(info.path).name or info.name: info for info in await registry(tmp_path, no_bundled).scan_async()}
    assert infos["frost_test_ep_plugin.py"].ok and infos["frost_test_ep_plugin.py"].name == "ep-squares"
    assert infos["cubes.py"].ok and infos["cubes.py"].name == "ep-cubes"
    assert all(info.source == "entry-point" for info in infos.values())
    assert not infos["attr"].ok and "not an attribute" in infos["attr"].error
    assert not infos["missing"].ok and "cannot find the module's source file" in infos["missing"].error


def test_load_plugin_file_names_the_file(tmp_path):
    path = write(tmp_path / "oops.py", "x = (\n")
    with pytest.raises(PluginError, match=r"oops.py:1: syntax error"):
        load_plugin_file(path)
    with pytest.raises(PluginError, match="not a .py file or a folder"):
        load_plugin_file(tmp_path / "nothing")


async def test_a_plugin_added_during_a_slower_scan_stays_listed(tmp_path, no_bundled):
    """The start-up scan may still run when the owner adds a plugin: its older list must not win."""
    slow = write(no_bundled / "slow.py", good_source(name="slow", tail="import time\ntime.sleep(1.5)\n"))
    plugins = registry(tmp_path, no_bundled)
    added = {}

    async def add_meanwhile():
        await trio.sleep(0.3)  # the start-up scan has listed its candidates and is validating slow.py
        slow.unlink()          # gone for the next scan, which therefore ends first
        added["info"] = await plugins.add_async(write(tmp_path / "mine" / "squares.py", good_source()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(plugins.scan_async)
        nursery.start_soon(add_meanwhile)
    assert added["info"].ok
    assert {info.name for info in plugins.plugins()} == {"squares"}
