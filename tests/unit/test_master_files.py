"""The master keeps assignments' input files by hash and units' output files, and exports them with the result."""

import sqlite3

import cbor2
import pytest

from frost_core.api.errors import FrostError
from frost_core.guest.views import InputFile
from frost_core.master import store as store_module
from frost_core.master.results import export_result, exported_files_folder, save_files
from frost_core.master.store import MasterStore, NewUnit

INPUTS = (InputFile("app", "ab" * 32, 10), InputFile("db", "cd" * 32, 0))


def finished_assignment(store: MasterStore, unit_files: list[dict]) -> str:
    assignment_id = store.create_assignment(
        plugin="grep", plugin_version="1", plugin_hash="0" * 64, params={},
        units=[NewUnit(data={}, memory_bytes=1, cost=1.0) for _ in unit_files], inputs=INPUTS,
    )
    for index, files in enumerate(unit_files):
        epoch = store.place_unit(assignment_id, index, host="me")
        assert store.accept_result(assignment_id, index, epoch=epoch, result=cbor2.dumps(index), files=files)
    store.finish_assignment(assignment_id, data=b"report", media_type="text/plain", filename="report.txt")
    return assignment_id


def test_inputs_are_part_of_the_assignment_and_of_each_unit(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="n0de0001")
    assignment_id = store.create_assignment(
        plugin="grep", plugin_version="1", plugin_hash="0" * 64, params={},
        units=[NewUnit(data={}, memory_bytes=1, cost=1.0)] * 2, inputs=INPUTS,
    )
    store.close()
    store = MasterStore(tmp_path / "master.sqlite", node_id="n0de0001")  # and after a restart
    record = store.assignment(assignment_id)
    assert record.inputs == INPUTS
    assert [u.inputs for u in record.units] == [INPUTS, INPUTS]
    assert [u.inputs for u in store.queued_units()] == [INPUTS, INPUTS]


def test_output_files_are_exported_beside_the_result_with_the_higher_unit_winning(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="n0de0001")
    assignment_id = finished_assignment(store, [{"0.txt": b"zero", "shared": b"from 0"}, {}, {"shared": b"from 2"}])
    results = tmp_path / "results"
    assert export_result(store, results, assignment_id) == results / f"{assignment_id}-report.txt"
    folder = exported_files_folder(results, assignment_id)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == {"0.txt": b"zero", "shared": b"from 2"}
    assert not list(results.glob(".*")), "no partial folder left behind"
    assert save_files(store, assignment_id, tmp_path / "elsewhere") == ["0.txt", "shared"]
    assert (tmp_path / "elsewhere" / "shared").read_bytes() == b"from 2"


def test_an_assignment_without_output_files_exports_no_folder(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="n0de0001")
    assignment_id = finished_assignment(store, [{}, {}])
    export_result(store, tmp_path / "results", assignment_id)
    assert [p.name for p in (tmp_path / "results").iterdir()] == [f"{assignment_id}-report.txt"]


def test_a_results_folder_that_cannot_be_made_is_a_clear_error_and_the_result_stays_in_the_database(tmp_path):
    store = MasterStore(tmp_path / "master.sqlite", node_id="n0de0001")
    assignment_id = finished_assignment(store, [{"0.txt": b"zero"}])
    (tmp_path / "results").write_text("a file where the folder belongs")
    with pytest.raises(FrostError, match="cannot make the folder .*results"):
        export_result(store, tmp_path / "results", assignment_id)
    assert store.result(assignment_id) == (b"report", "text/plain", "report.txt")
    with pytest.raises(FrostError, match="cannot make the folder .*elsewhere"):
        save_files(store, assignment_id, tmp_path / "results" / "elsewhere")


def test_a_stored_name_too_long_to_export_is_a_clear_error_not_an_os_error(tmp_path):
    # As a node before the 200-byte limit on output names could have stored it: the export fails with a
    # FrostError the node tells the owner about, where an OSError stopped the node at every start.
    store = MasterStore(tmp_path / "master.sqlite", node_id="n0de0001")
    assignment_id = store.create_assignment(plugin="grep", plugin_version="1", plugin_hash="0" * 64, params={},
                                            units=[NewUnit(data={}, memory_bytes=1, cost=1.0)])
    epoch = store.place_unit(assignment_id, 0, host="me")
    assert store.accept_result(assignment_id, 0, epoch=epoch, result=cbor2.dumps(0))
    assert store.finish_assignment(assignment_id, data=b"report", media_type="text/plain", filename="r" * 250)
    with pytest.raises(FrostError, match=f"cannot export the result of {assignment_id}"):
        export_result(store, tmp_path / "results", assignment_id)


def test_a_database_from_before_files_gains_the_columns_and_keeps_its_rows(tmp_path):
    path = tmp_path / "master.sqlite"
    old = sqlite3.connect(path)
    old.executescript(store_module._SCHEMA)  # the tables as the first release created them
    old.execute(
        "INSERT INTO assignments (id, seq, plugin, plugin_version, plugin_hash, params, state, created_at)"
        " VALUES ('n0de0001-1', 1, 'grep', '1', ?, ?, 'running', 0)", ("0" * 64, cbor2.dumps({})),
    )
    old.execute("INSERT INTO units (assignment_id, idx, data, memory_bytes, cost, state) VALUES"
                " ('n0de0001-1', 0, ?, 1, 1.0, 'queued')", (cbor2.dumps({}),))
    old.commit()
    old.close()
    store = MasterStore(path, node_id="n0de0001")
    record = store.assignment("n0de0001-1")
    assert record.inputs == () and record.units[0].inputs == ()
    epoch = store.place_unit("n0de0001-1", 0, host="me")
    assert store.accept_result("n0de0001-1", 0, epoch=epoch, result=cbor2.dumps(1), files={"a": b"b"})
    assert list(store.unit_files("n0de0001-1")) == [{"a": b"b"}]
