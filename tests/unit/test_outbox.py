"""What a host owes masters out of reach survives its own restart, and is dropped only when answered or expired."""

import dataclasses
import sqlite3
import subprocess
import sys
import textwrap

from frost_core.cluster.outbox import Outbox, owed_failure, owed_result


def test_owed_results_survive_a_kill_9_and_expire_only_after_the_hold(tmp_path):
    path = tmp_path / "outbox.sqlite"
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        from frost_core.cluster.outbox import Outbox, owed_result
        outbox = Outbox(Path({str(path)!r}))
        outbox.put(owed_result("m-1.0", "master", 3, b"result bytes"))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run([sys.executable, "-c", script], check=False)
    outbox = Outbox(path)
    (held,) = outbox.held()
    owed = outbox.owed(held.task_id)
    assert owed is not None and (owed.task_id, owed.epoch, owed.kind, owed.payload) == ("m-1.0", 3, "result", b"result bytes")
    outbox.put(dataclasses.replace(owed_failure("m-1.1", "master", 1, "plugin: boom", False),
                                   created_at=owed.created_at + 10))
    assert outbox.expire(older_than=owed.created_at - 1) == []
    assert [o.task_id for o in outbox.expire(older_than=owed.created_at + 0.5)] == ["m-1.0"]
    assert outbox.owed("m-1.0") is None
    outbox.remove("m-1.1")
    assert outbox.held() == []


def test_an_outbox_written_before_results_carried_their_cpu_time_still_opens_and_keeps_it_now(tmp_path):
    path = tmp_path / "outbox.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE outbox (task_id TEXT PRIMARY KEY, master TEXT NOT NULL, epoch INTEGER NOT NULL,"
                " kind TEXT NOT NULL, payload BLOB NOT NULL, reason TEXT NOT NULL DEFAULT '',"
                " retryable INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL)")
    old.execute("INSERT INTO outbox VALUES ('m-1.0', 'master', 1, 'result', x'00', '', 0, 1.0)")
    old.commit()
    old.close()
    outbox = Outbox(path)
    try:
        outbox.put(owed_result("m-1.1", "master", 2, b"r", 7.5))
        assert [(o.task_id, o.cpu_seconds) for o in map(outbox.owed, ("m-1.0", "m-1.1"))] == [("m-1.0", 0.0), ("m-1.1", 7.5)]
    finally:
        outbox.close()


def test_what_is_held_is_listed_oldest_first_from_the_index_without_reading_a_payload(tmp_path):
    """The host looks at the list every report interval for as long as a master is away (a week, by default): the
    look must not read the results, which SQLite keeps in overflow pages before a row's `created_at`."""
    outbox = Outbox(tmp_path / "outbox.sqlite")
    try:
        for n in (2, 0, 1):
            outbox.put(dataclasses.replace(owed_result(f"m-1.{n}", "master", 1, bytes([n]) * (1 << 20)), created_at=100.0 + n))
        assert [(h.task_id, h.created_at) for h in outbox.held()] == [("m-1.0", 100.0), ("m-1.1", 101.0), ("m-1.2", 102.0)]
        plan = outbox._db.execute("EXPLAIN QUERY PLAN SELECT task_id, master, epoch, kind, created_at FROM outbox"
                                  " ORDER BY created_at").fetchall()
        assert "COVERING INDEX" in plan[0][3], plan
        assert outbox.owed("m-1.2").payload == b"\x02" * (1 << 20)
    finally:
        outbox.close()


def test_spent_runs_owed_to_masters_survive_a_restart_until_settled(tmp_path):
    from frost_core.cluster.messages import SpentRun

    path = tmp_path / "outbox.sqlite"
    first, second = SpentRun("m-1.0", 2, 3.5, 100.0), SpentRun("m-1.1", 1, 0.25, 101.0)
    other = SpentRun("n-4.2", 1, 9.0, 99.0)
    outbox = Outbox(path)
    for master, run in (("m", first), ("m", second), ("n", other), ("m", first)):   # (a second write of one: once)
        outbox.owe_spent(master, run)
    outbox.close()
    outbox = Outbox(path)
    assert outbox.spent_owed() == {"m": [first, second], "n": [other]}
    outbox.settle_spent([first, other])
    assert outbox.spent_owed() == {"m": [second]}
    assert outbox.expire_spent(older_than=101.0) == 0 and outbox.expire_spent(older_than=101.5) == 1
    assert outbox.spent_owed() == {}
