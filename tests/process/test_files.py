"""Input and output files on one machine (master -> master): submit with --input, files come back at the master."""

from pathlib import Path

import pytest

from frost_core.plugin.api import run_locally
from frost_core.plugin.loader import load_plugin_file
from tests.process.guests import PLUGINS

pytestmark = pytest.mark.slow

PARAMS = {"pattern": "needle", "inputs": "app,db"}


def write_inputs(folder: Path) -> dict[str, Path]:
    folder.mkdir()
    app, db = folder / "app.log", folder / "db.log"
    app.write_bytes(b"".join(b"%d %s\n" % (i, b"needle" if i % 11 == 0 else b"hay") for i in range(200_000)))
    db.write_bytes(b"no match\n" * 1000 + b"last line with a needle and no newline")
    return {"app": app, "db": db}


def test_output_files_reach_the_master_bit_identical_to_a_local_run(single_node, tmp_path):
    inputs = write_inputs(tmp_path / "inputs")
    reference_dir = tmp_path / "reference"
    reference = run_locally(load_plugin_file(PLUGINS / "grep.py"), PARAMS, inputs=inputs, output_dir=reference_dir)
    # Not about the owner: the grep must run while other work loads this machine, which the default
    # `share` policy would rightly take for a busy owner.
    node = single_node('\n[owner]\npolicy = "always"\n')
    report = tmp_path / "grep.json"
    waited = node.cli("submit", "grep", *[f"--param={k}={v}" for k, v in PARAMS.items()],
                      *[f"--input={name}={path}" for name, path in inputs.items()], "--wait", "--output", str(report))
    assert report.read_bytes() == reference.data
    (assignment,) = node.call("assignments")
    # The summary is saved; the owner learns that the matching lines are in files, where, and how to get a copy.
    exported = node.data_dir / "results" / assignment["id"]
    assert assignment["files_folder"] == str(exported)   # where the screen says they are
    assert (f"Its units made 2 output files (app.matches, db.matches), kept in {exported}: "
            f"`frost-tui result {assignment['id']} --files DIR` saves a copy") in waited.stdout
    expected = {p.name: p.read_bytes() for p in reference_dir.iterdir()}
    assert set(expected) == {"app.matches", "db.matches"}
    assert {p.name: p.read_bytes() for p in exported.iterdir()} == expected

    saved = tmp_path / "saved"
    reply = node.cli("result", assignment["id"], "--output", str(tmp_path / "again.json"), "--files", str(saved))
    assert "Saved 2 output files" in reply.stdout
    assert {p.name: p.read_bytes() for p in saved.iterdir()} == expected


def test_a_missing_input_or_a_bad_name_is_a_clear_error(single_node, tmp_path):
    node = single_node()
    missing = node.cli("submit", "grep", "--input", f"app={tmp_path / 'nope.log'}", check=False)
    assert missing.returncode != 0 and "--input app:" in missing.stderr and "does not exist" in missing.stderr
    real = tmp_path / "real.log"
    real.write_text("a needle\n")
    bad = node.cli("submit", "grep", "--input", f"../app={real}", check=False)
    assert bad.returncode != 0 and "must be a plain file name" in bad.stderr
    malformed = node.cli("submit", "grep", "--input", str(real), check=False)
    assert malformed.returncode != 0 and "--input wants NAME=PATH" in malformed.stderr
    assert node.call("assignments") == []
