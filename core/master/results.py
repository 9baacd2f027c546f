"""Combined results as files: saved where the owner asks, and exported beside the data for the UI.

The database stays the durable copy; the export in data_dir/results/ is a readable file the UI
can preview and copy without asking the node, rebuilt from the database whenever it is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import FrostError
from .store import MasterStore


def exported_path(results_dir: Path, assignment_id: str, filename: str) -> Path:
    return results_dir / f"{assignment_id}-{Path(filename).name}"


def export_result(store: MasterStore, results_dir: Path, assignment_id: str) -> Path:
    """Write the assignment's result to data_dir/results/ unless it is already there."""
    data, _media_type, filename = store.result(assignment_id)
    path = exported_path(results_dir, assignment_id, filename)
    if not path.exists():
        results_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(path, data)
    return path


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
