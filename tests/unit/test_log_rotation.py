"""The node's log file rotates at its size limit, formatting each record once (four events a unit in a sweep)."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from frost_core.logs import _RotatingLog


class CountingFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(message)s")
        self.calls = 0

    def format(self, record: logging.LogRecord) -> str:
        self.calls += 1
        return super().format(record)


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("frost.events", logging.INFO, __file__, 1, message, None, None)


def test_the_log_rotates_at_its_limit_keeps_every_line_and_formats_each_record_once(tmp_path):
    path = tmp_path / "frost-tui.log"
    path.write_text("x" * 900 + "\n")   # a node restarted: what the file holds already counts
    handler = _RotatingLog(path, maxBytes=1000, backupCount=3, encoding="utf-8")
    formatter = CountingFormatter()
    handler.setFormatter(formatter)
    try:
        for i in range(30):
            handler.handle(record(f"unit {i:02d} finished " + "." * 70))   # 90 bytes a line
    finally:
        handler.close()
    assert formatter.calls == 30
    files = [path, *(tmp_path / f"frost-tui.log.{n}" for n in (1, 2, 3))]
    assert all(f.stat().st_size <= 1000 for f in files)
    lines = [line for f in reversed(files) for line in f.read_text().splitlines() if line.startswith("unit")]
    assert lines == [f"unit {i:02d} finished " + "." * 70 for i in range(30)]


def test_a_disk_that_refuses_the_log_is_said_once_not_once_a_record(capsys):
    """/dev/full refuses every write as a full disk does; the node (and a TUI on the same terminal) go on."""
    handler = _RotatingLog(Path("/dev/full"), maxBytes=1000, backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    try:
        for i in range(20):
            handler.handle(record(f"unit {i} finished"))
    finally:
        with contextlib.suppress(OSError):   # (its close flushes what is still buffered: refused again)
            handler.close()
    complaints = capsys.readouterr().err.splitlines()
    assert len(complaints) == 1 and "/dev/full" in complaints[0] and "No space left" in complaints[0]
