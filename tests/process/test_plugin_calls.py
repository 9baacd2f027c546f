"""split and combine run in throwaway subprocesses; a failing or hanging plugin gives a PluginError."""

import json
import os
import textwrap
from pathlib import Path

import psutil
import pytest
import trio

from frost_core.api.errors import PluginError
from frost_core.plugin.calls import combine_output, split_units
from frost_core.plugin.registry import PluginInfo, PluginRegistry, content_hash
from frost_core.plugin.spare import SpareWorker

from tests.plugin_sources import good_source
from tests.waiting import wait_until


def plugin_at(path: Path, name: str = "squares") -> PluginInfo:
    return PluginInfo(name, "1.0", content_hash(path), "added", str(path), True, None)


def write(tmp_path: Path, text: str, name: str = "squares.py") -> PluginInfo:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return plugin_at(path)


async def test_split_and_combine_a_bundled_plugin(tmp_path):
    plugins = PluginRegistry(tmp_path)
    await plugins.scan_async()
    info = plugins.get("montecarlo-pi")
    units = await split_units(info, {"samples": "1000", "units": "3"})
    assert [(u.index, u.data["begin"], u.data["end"]) for u in units] == [(0, 0, 333), (1, 333, 666), (2, 666, 1000)]
    output = await combine_output(info, {"samples": 1000, "units": 3}, [{"hits": 700, "samples": 333}, {"hits": 10, "samples": 667}])
    assert output.media_type == "application/json" and output.filename == "pi.json"
    assert json.loads(output.data)["hits"] == 710


async def test_bad_parameters_name_the_parameter(tmp_path):
    info = write(tmp_path, good_source())
    with pytest.raises(PluginError, match="parameter 'count': 0 is below the minimum 1"):
        await split_units(info, {"count": "0"})
    with pytest.raises(PluginError, match="unknown parameter 'size'"):
        await split_units(info, {"size": "0"})


async def test_split_that_raises_reports_the_exception_and_where(tmp_path):
    info = write(tmp_path, good_source().replace('return [WorkUnit(i, {"x": i}, 1024, 1.0)', 'return [1 / 0'))
    with pytest.raises(PluginError, match=r"split raised ZeroDivisionError: division by zero \(at .*squares.py:\d+\)"):
        await split_units(info, {})


async def test_split_that_loops_forever_is_killed_at_the_deadline(tmp_path):
    marker = tmp_path / "alive"
    info = write(tmp_path, good_source().replace(
        'return [WorkUnit(i, {"x": i}, 1024, 1.0) for i in range(params["count"])]',
        f"import os\n        open({str(marker)!r}, 'w').write(str(os.getpid()))\n        while True:\n            pass",
    ))
    with trio.fail_after(20):  # a generous bound on a hang, not a timing assertion
        with pytest.raises(PluginError, match="split did not finish within 1 s"):
            await split_units(info, {}, timeout=1.0)
    pid = int(marker.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the worker is gone
    assert len(await split_units(write(tmp_path, good_source(), "fine.py"), {})) == 3  # and we carry on


async def test_combine_that_loops_names_combine(tmp_path):
    info = write(tmp_path, good_source().replace('return Output(repr(results).encode(), "text/plain", "squares.txt")', "while True:\n            pass"))
    with pytest.raises(PluginError, match="combine did not finish within 1 s"):
        await combine_output(info, {}, [0, 1, 4], timeout=1.0)


async def test_orphans_holding_the_pipes_do_not_stall_a_call(tmp_path):
    info = write(tmp_path, good_source().replace(
        "def split(self, params):\n",
        "def split(self, params):\n        import subprocess, sys\n        subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n",
    ))
    with trio.fail_after(20):
        assert len(await split_units(info, {}, timeout=15.0)) == 3


async def test_worker_that_dies_gives_its_status_and_stderr(tmp_path):
    info = write(tmp_path, good_source().replace(
        "def split(self, params):\n",
        "def split(self, params):\n        import os, sys\n        print('last words', file=sys.stderr, flush=True)\n        os._exit(3)\n",
    ))
    with pytest.raises(PluginError, match=r"(?s)exited with status 3 and no reply.*last words"):
        await split_units(info, {})


async def test_output_printed_by_the_plugin_does_not_corrupt_the_reply(tmp_path):
    info = write(tmp_path, good_source().replace("def combine(self, params, results):\n", "def combine(self, params, results):\n        print('noise' * 1000)\n"))
    output = await combine_output(info, {}, [0, 1, 4])
    assert output.data == b"[0, 1, 4]"


async def test_combine_must_return_an_output(tmp_path):
    info = write(tmp_path, good_source().replace('return Output(repr(results).encode(), "text/plain", "squares.txt")', "return b'raw'"))
    with pytest.raises(PluginError, match="combine returned a bytes, not an Output"):
        await combine_output(info, {}, [])


async def test_split_must_number_its_units(tmp_path):
    info = write(tmp_path, good_source().replace("WorkUnit(i,", "WorkUnit(i + 1,"))
    with pytest.raises(PluginError, match="unit index 1 at position 0"):
        await split_units(info, {})


PID_SOURCE = good_source().replace('WorkUnit(i, {"x": i}', 'WorkUnit(i, {"x": __import__("os").getpid()}')
"""A plugin whose units carry the pid of the worker that split them."""


def waiting_workers() -> set[int]:
    """Worker processes this test process started that are still alive (a spare waiting for its request)."""
    found = set()
    for child in psutil.Process().children():
        try:
            if "frost_core.plugin.worker" in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                found.add(child.pid)
        except psutil.NoSuchProcess:
            pass  # gone (reaped) while we looked
    return found


async def test_a_spare_worker_takes_the_next_request_and_another_waits_for_the_one_after(tmp_path):
    info = write(tmp_path, PID_SOURCE)
    spare = SpareWorker(lambda: True)
    with trio.fail_after(30):  # a generous bound on a hang, not a timing assertion
        async with trio.open_nursery() as nursery:
            nursery.start_soon(spare.keep_warm)
            first = await wait_until(lambda: spare.pid, timeout=20, what="a spare worker")
            assert first in waiting_workers()
            units = await split_units(info, {}, spare=spare)
            assert {u.data["x"] for u in units} == {first}  # the split ran in the worker started ahead
            second = await wait_until(lambda: spare.pid not in (None, first) and spare.pid, timeout=20,
                                      what="the next spare")
            output = await combine_output(info, {}, [0, 1, 4], spare=spare)
            assert output.data == b"[0, 1, 4]"
            assert await wait_until(lambda: spare.pid not in (None, first, second), timeout=20, what="a third spare")
            assert first not in waiting_workers() and second not in waiting_workers()  # each answered once, then went
            nursery.cancel_scope.cancel()
    assert not waiting_workers()  # the spare ends with its keeper


async def test_a_spare_killed_from_outside_is_not_handed_a_request(tmp_path):
    info = write(tmp_path, PID_SOURCE)
    spare = SpareWorker(lambda: True)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(spare.keep_warm)
            killed = await wait_until(lambda: spare.pid, timeout=20, what="a spare worker")
            os.kill(killed, 9)
            await wait_until(lambda: killed not in waiting_workers(), timeout=20, what="the spare to die")
            units = await split_units(info, {}, spare=spare)
            assert len(units) == 3 and units[0].data["x"] != killed
            nursery.cancel_scope.cancel()


async def test_no_spare_waits_when_the_owner_wants_none(tmp_path):
    info = write(tmp_path, PID_SOURCE)
    wanted = [False]
    spare = SpareWorker(lambda: wanted[0])
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(spare.keep_warm)
            assert len(await split_units(info, {}, spare=spare)) == 3  # a fresh worker, as without a spare
            await trio.sleep(0.2)
            assert not waiting_workers()
            nursery.cancel_scope.cancel()


async def test_a_workers_exit_handlers_still_run(tmp_path):
    marker = tmp_path / "cleaned"
    info = write(tmp_path, good_source().replace(
        "def split(self, params):\n",
        f"def split(self, params):\n        import atexit, pathlib\n"
        f"        atexit.register(pathlib.Path({str(marker)!r}).write_text, 'yes')\n",
    ))
    assert len(await split_units(info, {})) == 3
    assert marker.read_text() == "yes"  # a plugin's clean-up at exit (a temporary folder's, say) still happens


async def test_a_spare_that_cannot_start_leaves_the_calls_to_fresh_workers(tmp_path, monkeypatch):
    info = write(tmp_path, PID_SOURCE)

    async def refused() -> trio.Process:
        raise BlockingIOError("fork refused")

    monkeypatch.setattr("frost_core.plugin.spare.start_worker", refused)
    spare = SpareWorker(lambda: True)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(spare.keep_warm)
            await trio.sleep(0.1)
            monkeypatch.undo()  # the calls' own fresh workers start again
            assert len(await split_units(info, {}, spare=spare)) == 3
            nursery.cancel_scope.cancel()
