"""A hostile plugin against a real contained guest: every escape it tries fails, and the node hears of it."""

from __future__ import annotations

import os
import pwd
import socket
import textwrap

import trio

from frost_core.guest import Completed, GuestSupervisor
from tests.guest_kit import COUNTER, HEADER, MIB, Recorder, counter_result, fast_settings, guest_processes, make_task
from tests.guest_kit import write_plugin
from tests.process.containment import require_containment
from tests.waiting import wait_until

HOSTILE = HEADER + textwrap.dedent(
    """
    import os, signal, socket, time

    class Hostile(Plugin):
        name = "hostile"
        version = "1"

        def start(self, unit):
            return dict(unit.data)

        def step(self, target):
            attempts = {}

            def attempt(name, action):
                try:
                    action()
                    attempts[name] = "allowed"
                except OSError as error:
                    attempts[name] = f"refused: {type(error).__name__}: {error.strerror}"  # and tells nobody

            def read(path):
                with open(path, "rb") as file:
                    file.read()

            def write(path):
                with open(path, "w") as file:
                    file.write("was here")

            def connect():
                with socket.create_connection(("127.0.0.1", target["tcp_port"]), timeout=5):
                    pass

            def send():
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
                    udp.sendto(b"hello", ("127.0.0.1", target["udp_port"]))

            def fork_past_limit():
                for _ in range(10_000):
                    if os.fork() == 0:
                        time.sleep(60)
                        os._exit(0)

            attempt("read cluster.key", lambda: read(target["key"]))
            attempt("read a file in the home", lambda: read(target["home_file"]))
            attempt("list the home", lambda: os.listdir(target["home"]))
            attempt("write outside scratch", lambda: write(target["outside"]))
            attempt("connect to 127.0.0.1", connect)
            attempt("send to 127.0.0.1", send)
            attempt("signal the node", lambda: os.kill(target["node_pid"], signal.SIGCONT))
            attempt("raise its priority", lambda: os.setpriority(os.PRIO_PROCESS, 0, 0))
            attempt("leave SCHED_IDLE", lambda: os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0)))
            attempt("take a real-time policy", lambda: os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1)))
            attempt("become root again", lambda: os.setuid(0))
            attempt("fork past pids.max", fork_past_limit)
            attempt("write in scratch", lambda: write("mine.txt"))  # its own folder stays usable
            attempt("read a file that is not there", lambda: read("missing.txt"))  # an error, but no refusal
            return Done({"attempts": attempts, "interfaces": [name for _, name in socket.if_nameindex()],
                         "uids": os.getresuid(), "gids": os.getresgid(), "groups": os.getgroups()})

        def progress(self, state):
            return 0.0
    """
) + textwrap.indent(textwrap.dedent(
    """
    def split(self, params):
        return [WorkUnit(0, {}, 1 << 20, 1.0)]

    def combine(self, params, results):
        return Output(b"", "text/plain", "out.txt")
    """
), "    ") + "\nplugin = Hostile()\n"


async def test_a_hostile_guest_fails_at_every_escape_and_the_node_and_other_guests_keep_running(tmp_path):
    require_containment()
    data_dir, home = tmp_path / "node", tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("owner's private key")
    data_dir.mkdir()
    (data_dir / "cluster.key").write_text("the cluster's secret")
    events = Recorder()
    guests = GuestSupervisor(data_dir=data_dir, settings=fast_settings(step_timeout=60), on_event=events)
    counter = write_plugin(tmp_path, "counter", COUNTER)
    counter_data = {"n": 300, "spin": 500}
    with socket.socket() as listener, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        udp.bind(("127.0.0.1", 0))
        udp.setblocking(False)
        target = {
            "key": str(data_dir / "cluster.key"), "home": str(home), "home_file": str(home / ".ssh" / "id_ed25519"),
            "outside": str(tmp_path / "planted.txt"), "tcp_port": listener.getsockname()[1],
            "udp_port": udp.getsockname()[1], "node_pid": os.getpid(),
        }
        # 64 MiB: its sixty-odd forks cost page tables, and the memory cgroup is not what this test is about.
        hostile = make_task(write_plugin(tmp_path, "hostile", HOSTILE), target, memory=64 * MIB, task_id="n0de0001-1.0")
        honest = make_task(counter, counter_data, task_id="n0de0001-2.0")
        outcomes = {}

        async def run(task) -> None:
            outcomes[task.task_id] = await guests.run(task)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, honest)
                nursery.start_soon(run, hostile)
                await wait_until(lambda: len(outcomes) == 2, timeout=60, what="both guests to end")
            isolation = guests.isolation().lines()
        finally:
            guests.close()
        assert isinstance(outcomes[honest.task_id], Completed)  # the other guest ran on, undisturbed
        assert outcomes[honest.task_id].value() == counter_result(counter, counter_data)
        outcome = outcomes[hostile.task_id]
        assert isinstance(outcome, Completed), outcome
        report = outcome.value()
        attempts = report["attempts"]
        for name in ("read cluster.key", "read a file in the home", "list the home", "write outside scratch",
                     "connect to 127.0.0.1", "signal the node", "raise its priority", "leave SCHED_IDLE",
                     "take a real-time policy", "become root again"):
            assert attempts[name].startswith("refused: PermissionError"), (name, attempts[name])
        assert attempts["send to 127.0.0.1"].startswith("refused: OSError: Network is unreachable")
        assert attempts["fork past pids.max"].startswith("refused: BlockingIOError")
        assert attempts["write in scratch"] == "allowed"
        assert report["interfaces"] == ["lo"]  # a network namespace of its own, its loopback down
        # A root node's guest ran all this as an unprivileged user, with no way back, and the report says which.
        nobody = pwd.getpwnam("nobody")
        assert report["uids"] == [nobody.pw_uid] * 3 and report["gids"] == [nobody.pw_gid] * 3, report
        assert report["groups"] == []
        assert f"user: uid {nobody.pw_uid} (nobody)" in isolation
        # Nothing got out: no connection, no datagram, no planted file.
        assert not os.path.exists(target["outside"])
        for sock in (listener, udp):
            try:
                sock.recv(1) if sock is udp else sock.accept()
                raise AssertionError(f"{sock} was reached")
            except BlockingIOError:
                pass
    # The node heard of each refusal as an event naming the guest and the attempt, though the plugin caught
    # every error and said nothing of it (its prints are only guest-log lines), and of the process limit (its cgroup).
    refused = [e.message for e in events.events if e.kind == "refused" and e.task_id == hostile.task_id]
    expected = {
        "read cluster.key": f"open {target['key']!r} for reading",
        "read a file in the home": f"open {target['home_file']!r} for reading",
        "list the home": f"listdir {target['home']!r}",
        "write outside scratch": f"open {target['outside']!r} for writing",
        "connect to 127.0.0.1": f"connect to ('127.0.0.1', {target['tcp_port']})",
        "send to 127.0.0.1": f"sendto to ('127.0.0.1', {target['udp_port']})",
        "signal the node": f"kill {target['node_pid']} with signal",
        "raise its priority": "setpriority to nice 0",
        "leave SCHED_IDLE": f"sched_setscheduler to policy {os.SCHED_OTHER}",
        "take a real-time policy": f"sched_setscheduler to policy {os.SCHED_FIFO}",
        "become root again": "setuid(0,)",
        "fork past pids.max": "was refused: fork (BlockingIOError",
    }
    for name, attempt in expected.items():
        assert any(attempt in message and message.startswith("guest hostile unit 0 was refused: ")
                   for message in refused), (name, refused)
    assert attempts["read a file that is not there"].startswith("refused: FileNotFoundError")
    assert not [message for message in refused if "missing.txt" in message]  # only the kernel's refusals count
    assert not [e for e in events.events if e.kind == "refused" and e.task_id == honest.task_id]
    assert any("process limit" in message for message in events.messages("error"))
    assert guest_processes() == []  # its forked children went with it
