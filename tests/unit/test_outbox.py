"""What a host owes masters out of reach survives its own restart, and is dropped only when answered or expired."""

import dataclasses
import subprocess
import sys
import textwrap

from frost_core.cluster.outbox import Outbox, owed_failure


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
    (owed,) = outbox.entries()
    assert (owed.task_id, owed.epoch, owed.kind, owed.payload) == ("m-1.0", 3, "result", b"result bytes")
    outbox.put(dataclasses.replace(owed_failure("m-1.1", "master", 1, "plugin: boom", False),
                                   created_at=owed.created_at + 10))
    assert outbox.expire(older_than=owed.created_at - 1) == []
    assert [o.task_id for o in outbox.expire(older_than=owed.created_at + 0.5)] == ["m-1.0"]
    outbox.remove("m-1.1")
    assert outbox.entries() == []
