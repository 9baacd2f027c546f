"""The plugin side of files (open_input, output_path, run_locally) and the checkpoint/result envelope."""

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import PluginError
from frost_core.guest.envelope import RESULT, STATE, pack, restore_outputs, unpack
from frost_core.plugin.api import (
    Done,
    LocalFiles,
    Output,
    Plugin,
    WorkUnit,
    check_file_name,
    collect_outputs,
    open_input,
    output_path,
    run_locally,
    unit_files,
)


class Writer(Plugin):
    """One unit that writes `written.txt` and finishes."""

    name = "writer"
    version = "1"

    def split(self, params):
        return [WorkUnit(0, {}, 1, 1.0)]

    def start(self, unit):
        return {}

    def step(self, state):
        output_path("written.txt").write_bytes(b"hello")
        return Done(1)

    def progress(self, state):
        return 0.0

    def combine(self, params, results):
        return Output(b"", "text/plain", "out.txt")


def test_files_work_only_while_a_unit_runs(tmp_path):
    with pytest.raises(PluginError, match="only while a unit runs"):
        open_input("data")
    with pytest.raises(PluginError, match="only while a unit runs"):
        output_path("out.txt")
    (tmp_path / "data.bin").write_bytes(b"abc")
    with unit_files(LocalFiles({"data": tmp_path / "data.bin"}, tmp_path / "out")):
        with open_input("data") as reader:
            assert reader.seek(1) == 1 and reader.read() == b"bc"
        assert output_path("x.txt") == tmp_path / "out" / "x.txt"
        with pytest.raises(FileNotFoundError, match="no input file named 'other' \\(this assignment has: data\\)"):
            open_input("other")


@pytest.mark.parametrize("bad", ["", ".", "..", ".hidden", "a/b", "a\\b", "nul\x00", "line\nbreak", "é" * 128, 7])
def test_file_names_are_plain_names(bad):
    with pytest.raises(PluginError, match="must be a plain file name"):
        check_file_name(bad)


def test_run_locally_needs_a_folder_for_output_files(tmp_path):
    with pytest.raises(PluginError, match="wrote output files \\(written.txt\\): give run_locally an output_dir"):
        run_locally(Writer())
    run_locally(Writer(), output_dir=tmp_path / "made")
    assert (tmp_path / "made" / "written.txt").read_bytes() == b"hello"


def test_only_plain_files_within_the_limit_travel(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"1234")
    assert collect_outputs(tmp_path) == {"a.txt": b"1234"}
    assert collect_outputs(tmp_path / "missing") == {}
    with pytest.raises(PluginError, match="over 3 bytes"):
        collect_outputs(tmp_path, limit=3)
    (tmp_path / "sub").mkdir()
    with pytest.raises(PluginError, match="'sub' is not a plain file"):
        collect_outputs(tmp_path)


def test_the_envelope_is_canonical_and_round_trips(tmp_path):
    files = {"b.txt": b"2" * 5000, "a.txt": b"1"}
    packed = pack(STATE, b"\xa0", files, 1 << 20)
    assert packed == pack(STATE, b"\xa0", dict(reversed(files.items())), 1 << 20)
    assert unpack(STATE, packed) == (b"\xa0", files)
    assert unpack(RESULT, pack(RESULT, b"\x01", {}, 100)) == (b"\x01", {})
    with pytest.raises(PluginError, match="over the limit of 100 bytes"):
        pack(STATE, b"", {"big": b"x" * 200}, 100)
    restore_outputs(tmp_path / "out", files)
    assert collect_outputs(tmp_path / "out") == files


@pytest.mark.parametrize(
    "value",
    [[], {"state": b""}, {"state": "text", "files": {}}, {"state": b"", "files": {"../x": b""}},
     {"state": b"", "files": {"a": "not bytes"}}, {"result": b"", "files": {}}],
)
def test_a_malformed_envelope_is_refused(value):
    with pytest.raises(PluginError):
        unpack(STATE, cbor2.dumps(value))


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_any_bytes_unpack_or_raise_plugin_error(data):
    try:
        payload, files = unpack(STATE, data)
    except PluginError:
        return
    assert isinstance(payload, bytes) and all(isinstance(v, bytes) for v in files.values())
