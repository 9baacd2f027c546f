"""Combined results as files: saved where the owner asks, and exported beside the data for the UI.

The database stays the durable copy; the export in data_dir/results/ is a readable file the UI
can preview and copy without asking the node, rebuilt from the database whenever it is missing.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from frost_core.api.errors import FrostError
from frost_core.master.store import MasterStore


def exported_path(results_dir: Path, assignment_id: str, filename: str) -> Path:
    return results_dir / f"{assignment_id}-{Path(filename).name}"


def export_result(store: MasterStore, results_dir: Path, assignment_id: str) -> Path:
    """Write the assignment's result to data_dir/results/ unless it is already there, and its units' output files.
    Any failure is a FrostError: the node goes on without the export (the database keeps the result)."""
    data, _media_type, filename = store.result(assignment_id)
    path = exported_path(results_dir, assignment_id, filename)
    try:
        if not path.exists():
            make_folder(results_dir)
            write_atomically(path, data)
        export_files(store, results_dir, assignment_id)
    except OSError as error:  # (a folder it may not enter, a name too long for this file system)
        raise FrostError(f"cannot export the result of {assignment_id} to {results_dir}: {error.strerror or error}",
                         title="Cannot save result") from error
    return path


def exported_files_folder(results_dir: Path, assignment_id: str) -> Path:
    return results_dir / assignment_id


def export_files(store: MasterStore, results_dir: Path, assignment_id: str) -> Path | None:
    """Write the units' output files to data_dir/results/<assignment>/ unless the folder is there; None if none.

    The folder is filled under a hidden name and renamed, so it is either whole or absent.
    """
    folder = exported_files_folder(results_dir, assignment_id)
    if folder.exists():
        return folder
    partial = results_dir / f".{assignment_id}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    if not save_files(store, assignment_id, partial):
        shutil.rmtree(partial, ignore_errors=True)
        return None
    try:
        os.replace(partial, folder)
    except OSError as error:
        raise FrostError(f"cannot write {folder}: {error.strerror}", title="Cannot save result") from error
    return folder


def save_files(store: MasterStore, assignment_id: str, folder: Path) -> list[str]:
    """Write every unit's output files into `folder`, in unit order; return their names, sorted.

    All units share one folder, so of two units that wrote the same name the higher unit
    index wins: the last writer, as in GASS, but the same one however the units ran.
    """
    names: set[str] = set()
    for files in store.unit_files(assignment_id):
        for name, data in files.items():
            make_folder(folder)
            write_atomically(folder / Path(name).name, data)
            names.add(name)
    return sorted(names)


def make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FrostError(f"cannot make the folder {folder}: {error.strerror}", title="Cannot save result") from error


def write_atomically(path: Path, data: bytes) -> None:
    """Never leave half a result file behind: write a sibling, fsync, then rename over."""
    if path.is_dir():
        raise FrostError(f"{path} is a directory; give a file name", title="Cannot save result")
    temporary = path.with_name(f".{path.name}.partial")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise FrostError(f"cannot write {path}: {error.strerror}", title="Cannot save result") from error
