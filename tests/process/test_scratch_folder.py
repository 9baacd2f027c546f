"""A guest's scratch folder is made anew whatever the guest left in it, as the node's own user would meet it.

A guest that runs as the node's user (a node that is not root cannot give it another) may leave folders it
made read-only or unreadable, as some tools make their caches. Root removes anything, so as root the test runs
the node's side in a forked child as uid 65534, the owner of everything the guest left.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from frost_core.guest.spawn import fresh_folder

NOBODY = 65534


def as_one_user(work: Callable[[], object]) -> object:
    """`work()` in a forked child, as uid and gid 65534 when this is root; its JSON value, or its error's repr."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            os.write(write, json.dumps({"value": work()}).encode())
        except BaseException as error:
            os.write(write, json.dumps({"error": repr(error)}).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        outcome = json.loads(answer.read())
    os.waitpid(pid, 0)
    assert "error" not in outcome, outcome["error"]
    return outcome["value"]


def test_a_scratch_folder_with_read_only_and_unreadable_folders_is_made_empty_without_following_links():
    home = Path(tempfile.mkdtemp(prefix="scratch-"))
    if os.geteuid() == 0:
        os.chown(home, NOBODY, NOBODY)

    def guest_leaves_a_mess_then_the_node_starts_the_unit_again():
        outside = home / "owner"  # the owner's folder, which a link in the scratch folder points to
        outside.mkdir(mode=0o755)
        (outside / "notes.txt").write_text("mine")
        scratch = home / "scratch"
        (scratch / "cache" / "pkg").mkdir(parents=True)
        (scratch / "cache" / "pkg" / "module.txt").write_text("cached")
        os.chmod(scratch / "cache" / "pkg", 0o555)
        os.chmod(scratch / "cache", 0o555)
        (scratch / "hidden").mkdir()
        (scratch / "hidden" / "data").write_text("unreadable")
        os.chmod(scratch / "hidden", 0)
        (scratch / "owner").symlink_to(outside)
        fresh_folder(scratch)
        return {"left": os.listdir(scratch), "mode": oct(scratch.stat().st_mode & 0o777),
                "outside": [oct(outside.stat().st_mode & 0o777), (outside / "notes.txt").read_text()]}

    try:
        assert as_one_user(guest_leaves_a_mess_then_the_node_starts_the_unit_again) == {
            "left": [], "mode": "0o700", "outside": ["0o755", "mine"]}
    finally:
        as_one_user(lambda: fresh_folder(home))  # (as the user that owns what is in it)
        os.rmdir(home)
