"""What the owner chose in the UI and expects to find again next time, as htop and k9s keep theirs: the
Peers tab's sort, the Guests tab's tree, the columns hidden, the colour theme. One small file per desk, `ui.json` in the data dir; the node never reads it."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("frost.tui")

CHOICES_FILE = "ui.json"


@dataclass(frozen=True)
class UiChoices:
    peers_sort: str = "Available"     # the title of the column the Peers table is sorted by
    peers_descending: bool = True
    guests_tree: bool = False         # the Guests tab as a tree of assignments (t), not a flat list
    theme: str = ""                   # the colour theme picked in the palette (ctrl+p, Theme); "": Textual's default
    hidden_columns: dict = dataclasses.field(default_factory=dict)   # table id -> titles of the columns hidden (v)

    @classmethod
    def load(cls, path: Path | None) -> UiChoices:
        """The choices kept at `path`: the defaults where there are none, or (with a warning in the log) where
        the file does not hold choices: a UI starts whatever its last run left behind."""
        if path is None:
            return cls()
        try:
            plain = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as error:
            log.warning("%s not read (%s): the UI starts with its default choices", path, error)
            return cls()
        defaults = dataclasses.asdict(cls())
        if not isinstance(plain, dict) or any(not isinstance(plain.get(name, value), type(value))
                                              for name, value in defaults.items()) or not all(
                isinstance(titles, list) and all(isinstance(title, str) for title in titles)
                for titles in plain.get("hidden_columns", {}).values()):
            log.warning("%s does not hold the UI's choices (%.80r): it starts with its defaults", path, plain)
            return cls()
        return cls(**{name: plain.get(name, value) for name, value in defaults.items()})

    def save(self, path: Path | None) -> None:
        """Replace the file whole (a temp file renamed over it); a failure is logged, and the choice holds for
        this run only. Not synced: a choice lost to a crash is made again with one key."""
        if path is None:
            return
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            temp.write_text(json.dumps(dataclasses.asdict(self), indent=1) + "\n", encoding="utf-8")
            os.replace(temp, path)
        except OSError as error:
            log.warning("%s not written (%s): the UI's choices hold until it quits", path, error)
            temp.unlink(missing_ok=True)
