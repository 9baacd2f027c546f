"""Logging to a rotating file in the log directory, so a long-running node never fills the disk,
or to the journal when systemd runs the node (it rotates and timestamps by itself)."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
from pathlib import Path

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(log_dir: Path, level: str, *, also_stderr: bool = False, filename: str = "frost-tui.log") -> Path:
    """Send frost's log records to log_dir/`filename` (5 files of 2 MB); return the path."""
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / filename
    handler = _RotatingLog(path, maxBytes=2_000_000, backupCount=4, encoding="utf-8")
    handler.setFormatter(logging.Formatter(_FORMAT))
    root = logging.getLogger("frost")
    root.handlers[:] = [handler]
    if also_stderr:
        stream = logging.StreamHandler()
        stream.setFormatter(logging.Formatter(_FORMAT))
        root.addHandler(stream)
    root.setLevel(level.upper())
    root.propagate = False
    return path


class _RotatingLog(logging.handlers.RotatingFileHandler):
    """Rotates by its own count of what it wrote: the standard handler formats each record twice and
    stats, seeks and asks the file's size for each, and a sweep of tiny units logs four events a unit."""

    def __init__(self, path: Path, **options) -> None:
        super().__init__(path, **options)
        self._size = self._size_now()
        self._refused = False   # the last write failed (a full disk): said once on stderr, not once a record

    def _size_now(self) -> float:
        """What the file holds; a file that is not a regular one (/dev/null) never rotates (bpo-45401)."""
        return os.path.getsize(self.baseFilename) if os.path.isfile(self.baseFilename) else -float("inf")

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
            if self._size > 0 and self._size + len(line) >= self.maxBytes:
                self.doRollover()
                self._size = self._size_now()
            self.stream.write(line)
            self.flush()
            self._size += len(line)
            self._refused = False
        except RecursionError:
            raise
        except OSError as error:
            if not self._refused:
                self._refused = True
                sys.stderr.write(f"frost-tui: the log file {self.baseFilename} is not written ({error}); "
                                 "it is written again once the disk takes it\n")
        except Exception:
            self.handleError(record)


_JOURNAL_PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}
"""syslog priorities: journald reads a leading `<N>` on each stderr line as the line's priority."""


class _JournalFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        priority = _JOURNAL_PRIORITY.get(record.levelno, 6)
        return "\n".join(f"<{priority}>{line}" for line in super().format(record).splitlines())


def configure_journal_logging(level: str) -> None:
    """Send frost's log records to stderr, one `<N>`-prefixed line each, for journald."""
    handler = logging.StreamHandler()
    handler.setFormatter(_JournalFormatter("%(name)s: %(message)s"))
    root = logging.getLogger("frost")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
