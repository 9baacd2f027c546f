"""The bundled grep plugin: known matches, and the same output files however often its units stop and move."""

import json
import random
from pathlib import Path

import pytest

from frost_core.api.errors import PluginError
from frost_core.guest.envelope import STATE, pack, restore_outputs, unpack
from frost_core.plugin.api import (
    MAX_STATE_BYTES,
    Done,
    LocalFiles,
    collect_outputs,
    decode_plain,
    encode_plain,
    parse_params,
    run_locally,
    unit_files,
)
from frost_plugins import grep

LOG = b"".join(b"%d %s\n" % (i, b"Needle here" if i % 13 == 0 else b"hay" * (i % 4)) for i in range(30_000))


@pytest.fixture
def inputs(tmp_path):
    files = {"app": LOG, "short": b"needle\n\nNEEDLE\nno newline at the end: needle", "empty": b""}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return {name: tmp_path / name for name in files}


def test_grep_reference_report_and_matches(inputs, tmp_path):
    out = tmp_path / "out"
    output = run_locally(grep.plugin, {"pattern": "needle", "inputs": "app,short,empty", "ignore_case": "true"},
                         inputs=inputs, output_dir=out)
    assert (output.media_type, output.filename) == ("application/json", "grep.json")
    report = json.loads(output.data)
    assert report["files"] == [
        {"name": "app", "lines": 30_000, "matches": 2308, "matches_file": "app.matches"},
        {"name": "short", "lines": 4, "matches": 3, "matches_file": "short.matches"},
        {"name": "empty", "lines": 0, "matches": 0, "matches_file": "empty.matches"},
    ]
    assert report["total_matches"] == 2311
    assert (out / "short.matches").read_bytes() == b"1:needle\n3:NEEDLE\n4:no newline at the end: needle\n"
    assert (out / "empty.matches").read_bytes() == b""
    expected = b"".join(b"%d:%d Needle here\n" % (i + 1, i) for i in range(0, 30_000, 13))
    assert (out / "app.matches").read_bytes() == expected


def test_case_matters_unless_ignored(inputs, tmp_path):
    output = run_locally(grep.plugin, {"pattern": "needle", "inputs": "short"}, inputs=inputs, output_dir=tmp_path)
    assert json.loads(output.data)["total_matches"] == 2
    assert (tmp_path / "short.matches").read_bytes() == b"1:needle\n4:no newline at the end: needle\n"


def run_with_chaos(raw: dict, inputs: dict, rng: random.Random, scratch: Path) -> tuple[bytes, dict]:
    """Every unit the hard way: states and output files through checkpoint envelopes, kills that
    resume from the last checkpoint in a fresh folder (another host), restarts from scratch."""
    params = parse_params(grep.plugin, raw)
    results, outputs = [], {}
    for unit in grep.plugin.split(params):
        folder = scratch / f"unit-{unit.index}"
        restore_outputs(folder, {})
        with unit_files(LocalFiles(inputs, folder)):
            checkpoint = pack(STATE, encode_plain(grep.plugin.start(unit)), {}, MAX_STATE_BYTES)
            state = decode_plain(unpack(STATE, checkpoint)[0])
            while True:
                after = grep.plugin.step(state)
                if isinstance(after, Done):
                    results.append(decode_plain(encode_plain(after.result)))
                    outputs.update(collect_outputs(folder))
                    break
                blob = pack(STATE, encode_plain(after), collect_outputs(folder), MAX_STATE_BYTES)
                roll = rng.random()
                if roll < 0.3:
                    checkpoint = blob
                if roll > 0.9:  # killed: the checkpoint resumes on a host with an empty folder
                    saved, files = unpack(STATE, checkpoint)
                    restore_outputs(folder, files)
                    state = decode_plain(saved)
                elif roll > 0.87:  # every checkpoint lost: start over
                    restore_outputs(folder, {})
                    checkpoint = pack(STATE, encode_plain(grep.plugin.start(unit)), {}, MAX_STATE_BYTES)
                    state = decode_plain(unpack(STATE, checkpoint)[0])
                else:
                    state = decode_plain(unpack(STATE, blob)[0])
    return grep.plugin.combine(params, results).data, outputs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_grep_output_is_bit_identical_through_kills_restarts_and_moves(inputs, tmp_path, seed):
    raw = {"pattern": "needle", "inputs": "app,short,empty", "ignore_case": "true"}
    reference = run_locally(grep.plugin, raw, inputs=inputs, output_dir=tmp_path / "reference")
    data, outputs = run_with_chaos(raw, inputs, random.Random(seed), tmp_path / "chaos")
    assert data == reference.data
    assert outputs == {p.name: p.read_bytes() for p in (tmp_path / "reference").iterdir()}


def test_grep_refuses_what_it_cannot_do(inputs, tmp_path):
    for raw, message in (
        ({"inputs": " , "}, "at least one input"),
        ({"inputs": "app,app"}, "named twice"),
        ({"inputs": "app", "pattern": ""}, "must not be empty"),
    ):
        with pytest.raises(PluginError, match=message):
            grep.plugin.split(parse_params(grep.plugin, raw))
    (tmp_path / "wide").write_bytes(b"x" * (grep.MAX_LINE + grep.CHUNK + 1))
    with pytest.raises(PluginError, match="is over 1048576 bytes"):
        run_locally(grep.plugin, {"inputs": "wide"}, inputs={"wide": tmp_path / "wide"}, output_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="no input file named 'app'"):
        run_locally(grep.plugin, {"inputs": "app"}, inputs={}, output_dir=tmp_path)
