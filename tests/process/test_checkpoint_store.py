"""Checkpoint files: durable, verified, never half-written, old one kept until the new one is safe."""

import dataclasses
import errno
import hashlib
import logging
import os
import random
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import Future

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import frost_core.storage.checkpoints as store_module
from frost_core.storage.checkpoints import (
    MAGIC,
    CheckpointRecord,
    CheckpointStore,
    decode_header,
    encode_header,
    read_record,
)
from frost_core.api.errors import CheckpointError, ProtocolError
from frost_core.guest.protocol import GuestCheckpoint, GuestProgress
from frost_core.guest.running import answer_up_the_pipe
from frost_core.wire.lent import LentPipe
from frost_core.wire.pipe import write_bulk, write_frame
from tests.waiting import wait_for


BIG = store_module.SLOTS_BELOW + (1 << 20)
"""A state too big for a slot: written to a temp file and renamed into place."""


def make_record(seq: int, state: bytes | None = None, task_id: str = "abcd1234-1.0") -> CheckpointRecord:
    return CheckpointRecord.seal(
        task_id=task_id, plugin_name="counter", plugin_version="1", plugin_hash="f" * 64,
        unit_index=0, epoch=3, seq=seq, taken_at=1700000000.0 + seq,
        state=state if state is not None else bytes([seq % 256]) * (1000 + seq),
    )


def checkpoint_files(store: CheckpointStore, task_id: str = "abcd1234-1.0") -> list[str]:
    return sorted(p.name for p in (store.root / task_id).iterdir())


def valid_seqs(store: CheckpointStore, task_id: str = "abcd1234-1.0") -> list[int]:
    """The seqs of the task's files that read whole, highest first (a torn slot has none)."""
    seqs = []
    for path in (store.root / task_id).iterdir():
        try:
            seqs.append(read_record(path).seq)
        except CheckpointError:
            pass
    return sorted(seqs, reverse=True)


def file_of(store: CheckpointStore, seq: int, task_id: str = "abcd1234-1.0"):
    """The file that holds checkpoint `seq` whole."""
    return next(path for path in (store.root / task_id).iterdir()
                if not path.name.startswith(".") and read_record(path).seq == seq)


def no_temp_files(store: CheckpointStore, task_id: str = "abcd1234-1.0") -> bool:
    return not [name for name in checkpoint_files(store, task_id) if name.startswith(".tmp-")]


def old_style(store: CheckpointStore, record: CheckpointRecord) -> None:
    """Leave `record` as the versions before slots did: a file named for its seq."""
    folder = store.root / record.task_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{record.seq:016d}.ckpt").write_bytes(encode_header(record) + record.state)


def test_round_trip_keeps_every_field(tmp_path):
    store = CheckpointStore(tmp_path)
    record = make_record(7, state=b"\x00state\xff" * 100)
    store.write(record)
    assert store.latest(record.task_id) == record
    assert store.list_tasks() == [record.task_id]


def test_a_new_small_checkpoint_overwrites_the_slot_that_does_not_hold_the_newest(tmp_path):
    store = CheckpointStore(tmp_path)
    for seq in (1, 2, 3):
        store.write(make_record(seq))
        assert store.latest("abcd1234-1.0").seq == seq
        assert valid_seqs(store) == list(range(seq, max(seq - 2, 0), -1)), "the newest and the one before"
    assert checkpoint_files(store) == ["slot-0.ckpt", "slot-1.ckpt"]


def test_a_slot_much_longer_than_its_new_checkpoint_is_cut_and_a_shorter_one_keeps_the_rest_unread(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1, state=os.urandom(1 << 20)))
    store.write(make_record(2, state=os.urandom(600_000)))
    store.write(make_record(3, state=b"c" * 600_000))   # over a 1 MiB slot: kept as long, the rest not read
    assert file_of(store, 3).stat().st_size > 1 << 20 and store.latest("abcd1234-1.0") == make_record(3, b"c" * 600_000)
    store.write(make_record(4, state=b"d" * 1000))      # over a 600 kB slot: cut to size
    assert file_of(store, 4).stat().st_size < 2000 and store.latest("abcd1234-1.0") == make_record(4, b"d" * 1000)


@pytest.mark.parametrize(("first", "second"), [(BIG, BIG), (BIG, 100_000)], ids=["big", "big-then-slot"])
def test_a_replaced_checkpoint_is_gone_by_name_at_once_and_released_off_the_commits_thread(tmp_path, monkeypatch,
                                                                                             first, second):
    """Its name goes before the commit returns (a scan sees one checkpoint); its blocks are freed by the
    last close, which no commit waits for, and no replaced file stays open."""
    store = CheckpointStore(tmp_path)
    store.write(make_record(1, state=os.urandom(first)))
    old = str(tmp_path / "abcd1234-1.0" / f"{1:016d}.ckpt")
    events = []  # ("open", fd) of the replaced file, ("close", fd, thread) of every file, in order
    real_open, real_close = os.open, os.close

    def watched_open(path, *args, **kwargs):
        fd = real_open(path, *args, **kwargs)
        if str(path) == old:
            events.append(("open", fd))
        return fd

    def watched_close(fd):
        events.append(("close", fd, threading.current_thread()))
        real_close(fd)

    def closer_of_the_replaced_file():
        opened = [index for index, event in enumerate(events) if event[0] == "open"]
        closes = [event for event in events[opened[0]:] if event[:2] == ("close", events[opened[0]][1])]
        return closes[0][2] if closes else None

    monkeypatch.setattr(store_module.os, "open", watched_open)
    monkeypatch.setattr(store_module.os, "close", watched_close)
    store.write(make_record(2, state=os.urandom(second)))
    assert checkpoint_files(store) == [f"{2:016d}.ckpt" if second == first else "slot-0.ckpt"]
    assert [event for event in events if event[0] == "open"], "the replaced file was opened to be released"
    closer = wait_for(closer_of_the_replaced_file, timeout=10, what="the replaced file's close")
    monkeypatch.undo()
    assert closer is not threading.current_thread(), "the commit's own thread freed the replaced file's blocks"
    assert not [path for path in open_files() if path.startswith(old)], "a replaced checkpoint is still held open"
    assert store.latest("abcd1234-1.0").seq == 2


def open_files() -> list[str]:
    """What this process holds open (an fd may close while it is listed)."""
    paths = []
    for name in os.listdir("/proc/self/fd"):
        try:
            paths.append(os.readlink(f"/proc/self/fd/{name}"))
        except FileNotFoundError:
            pass
    return paths


def test_a_small_commit_writes_its_file_in_one_call_and_never_scans_its_folder(tmp_path, monkeypatch):
    """Hashed before it is written, a small state goes out with its header in one writev; the folder
    is neither stat'ed nor listed once the store has written there (a commit per checkpoint interval)."""
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    calls = []
    for name in ("write", "writev", "pwrite", "lseek", "stat", "listdir", "scandir"):
        real = getattr(os, name)
        monkeypatch.setattr(store_module.os, name,
                            lambda *args, real=real, name=name, **kwargs: calls.append(name) or real(*args, **kwargs))
    try:
        record = store.commit(**{**IDENTITY, "seq": 2}, state=os.urandom(100_000))
    finally:
        monkeypatch.undo()  # before pytest reports: it calls os.stat too
    assert calls == ["writev"]
    assert store.latest("abcd1234-1.0") == record


def test_discard_removes_the_task(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    store.discard("abcd1234-1.0")
    assert store.latest("abcd1234-1.0") is None
    assert store.list_tasks() == []
    store.discard("abcd1234-1.0")  # discarding twice is harmless


def test_empty_state_is_a_valid_checkpoint(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1, state=b""))
    assert store.latest("abcd1234-1.0").state == b""


@pytest.mark.parametrize("task_id", ["../escape", "a/b", "", ".hidden", "x" * 300, "a..b"])
def test_task_ids_that_could_escape_the_store_are_refused(tmp_path, task_id):
    with pytest.raises(CheckpointError, match="invalid task id"):
        CheckpointStore(tmp_path).latest(task_id)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "SHA-256"),            # flipped bit in the state
        (lambda data: data[:20] + bytes([data[20] ^ 1]) + data[21:], ""),        # flipped bit in the header
        (lambda data: data[: len(data) // 2], "state bytes"),                    # truncated
        (lambda data: b"NOTFROST" + data[8:], "bad magic"),                      # foreign file
        (lambda data: data[:8] + b"\xff\xff\xff\xff" + data[12:], "cap"),        # absurd header length
        (lambda data: b"", "truncated"),                                         # empty file
    ],
)
@pytest.mark.parametrize("named", [False, True], ids=["slots", "older-version-names"])
def test_a_damaged_newest_checkpoint_is_skipped_with_a_log_line(tmp_path, caplog, damage, problem, named):
    store = CheckpointStore(tmp_path)
    if named:  # as if the crash came before the old one was removed
        old_style(store, make_record(1))
        old_style(store, make_record(2))
    else:
        store.write(make_record(1))
        store.write(make_record(2))
    newest = file_of(store, 2)
    newest.write_bytes(damage(newest.read_bytes()))
    store = CheckpointStore(tmp_path)
    with caplog.at_level(logging.WARNING, logger="frost_core.storage.checkpoints"):
        record = store.latest("abcd1234-1.0")
    assert record is not None and record.seq == 1
    assert "skipping unreadable checkpoint" in caplog.text and problem in caplog.text


def torn(path, new: bytes, at: int, cut: bool) -> None:
    """`path` as a crash in the middle of overwriting it in place with `new` leaves it: the first `at` bytes
    written, then either the file's end (a slot written for the first time) or what it held before."""
    old = path.read_bytes()
    path.write_bytes(new[:at] if cut else new[:at] + old[at:])


@pytest.mark.parametrize("cut", [False, True], ids=["over-the-old", "cut"])
@pytest.mark.parametrize("where", ["magic", "header", "state-start", "middle", "last-byte"])
def test_a_torn_newest_slot_reads_as_the_checkpoint_before_and_a_restart_writes_over_the_torn_one(tmp_path, where,
                                                                                                   cut):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    store.write(make_record(2))
    new = make_record(3, state=b"\x03" * 1002)  # as long as seq 1's: a tear leaves no length to notice
    replaced = file_of(store, 1)
    data = encode_header(new) + new.state
    at = {"magic": 5, "header": 30, "state-start": len(encode_header(new)) + 1, "middle": len(data) // 2,
          "last-byte": len(data) - 1}[where]
    torn(replaced, data, at, cut)
    restarted = CheckpointStore(tmp_path)
    assert restarted.latest("abcd1234-1.0") == make_record(2)
    restarted.write(make_record(3))
    assert valid_seqs(restarted) == [3, 2], "the write went over the torn slot, not the newest valid one"


def test_a_restarted_store_never_overwrites_the_only_valid_checkpoint(tmp_path):
    """The first slot holds the only valid checkpoint, the second a torn newer one: without `latest` first,
    a restarted store's write must still find which is which."""
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    store.write(make_record(2))
    second = file_of(store, 2)
    torn(second, encode_header(make_record(3)) + make_record(3).state, 100, cut=False)
    restarted = CheckpointStore(tmp_path)
    restarted.write(make_record(3, state=b"x" * 10))
    assert valid_seqs(restarted) == [3, 1]
    restarted.write(make_record(4))
    assert valid_seqs(restarted) == [4, 3]


def test_older_versions_files_are_read_by_their_headers_seq_and_replaced_cleanly(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    store.write(make_record(2))
    old_style(store, make_record(9))  # named for its seq, as an older version or a big state's rename leaves it
    restarted = CheckpointStore(tmp_path)
    assert restarted.latest("abcd1234-1.0") == make_record(9), "ordered by the header's seq, not the name"
    restarted.write(make_record(10))
    assert valid_seqs(restarted) == [10, 2] and f"{9:016d}.ckpt" not in checkpoint_files(restarted)
    restarted.write(make_record(11, state=os.urandom(BIG)))  # too big for a slot: renamed into place, alone
    assert checkpoint_files(restarted) == [f"{11:016d}.ckpt"]
    restarted.write(make_record(12))
    assert valid_seqs(restarted) == [12] and checkpoint_files(restarted) == ["slot-0.ckpt"]
    restarted.write(make_record(13))
    assert CheckpointStore(tmp_path).latest("abcd1234-1.0") == make_record(13) and valid_seqs(restarted) == [13, 12]


def test_a_checkpoint_written_last_is_the_newest_even_with_a_lower_seq(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(5))
    store.write(make_record(3))  # as the old one-file store did: what was written last is what resumes
    assert CheckpointStore(tmp_path).latest("abcd1234-1.0") == make_record(3)


def test_a_read_that_writes_overtake_still_returns_a_whole_checkpoint_no_older_than_when_it_began(tmp_path,
                                                                                              monkeypatch):
    """Each time the reader has a file's header and is about to read its state, writers come: two, then one.
    Were they let in, the slot it reads would be overwritten twice in place and the other once, both torn
    under it: it would find nothing. The task's lock holds them until the read is done."""
    def big(seq):  # read in more than one go, so a write can come between the header and the state
        return make_record(seq, state=bytes([seq]) * 100_000)

    store = CheckpointStore(tmp_path)
    store.write(big(1))
    store.write(big(2))
    reader, bursts, writers = threading.current_thread(), [[3, 4], [5]], []
    real_fstat = os.fstat

    def writers_come(fd):
        if threading.current_thread() is reader and bursts:
            burst = bursts.pop(0)
            writers.append(threading.Thread(target=lambda: [store.write(big(seq)) for seq in burst]))
            writers[-1].start()
            writers[-1].join(timeout=0.3)  # long enough for the writes, were they not held back
        return real_fstat(fd)

    monkeypatch.setattr(store_module.os, "fstat", writers_come)
    try:
        record = store.latest("abcd1234-1.0")
    finally:
        monkeypatch.undo()
        for writer in writers:
            writer.join()
    assert record is not None and record.seq >= 2
    assert store.latest("abcd1234-1.0") == big(max(seq for burst in ([3, 4], [5]) if burst not in bursts
                                                   for seq in burst))


def test_only_damaged_checkpoints_means_none(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    path = file_of(store, 1)
    path.write_bytes(path.read_bytes()[:-3])
    assert CheckpointStore(tmp_path).latest("abcd1234-1.0") is None


def test_temp_files_of_an_interrupted_write_are_ignored_and_cleaned(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    leftover = store.root / "abcd1234-1.0" / ".tmp-2-deadbeef"
    leftover.write_bytes(MAGIC + b"\x00\x00")
    assert store.latest("abcd1234-1.0").seq == 1
    restarted = CheckpointStore(tmp_path)  # a leftover is a crash's: the next write is a new process's
    restarted.write(make_record(2))
    assert no_temp_files(store) and valid_seqs(store) == [2, 1]
    restarted.write(make_record(3))
    assert no_temp_files(store) and valid_seqs(store) == [3, 2]


@pytest.mark.parametrize("size", [1000, BIG], ids=["slot", "renamed"])
@pytest.mark.parametrize("failing_call", [1, 2], ids=["file-fsync", "directory-fsync"])
def test_an_fsync_failure_fails_the_checkpoint_and_keeps_the_old_one(tmp_path, monkeypatch, failing_call, size):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    calls = []

    def failing(real):
        def sync(fd):
            calls.append(fd)
            if len(calls) == failing_call:
                raise OSError(errno.EIO, "Input/output error")
            real(fd)
        return sync

    monkeypatch.setattr(store_module.os, "fsync", failing(os.fsync))
    monkeypatch.setattr(store_module.os, "fdatasync", failing(os.fdatasync))
    with pytest.raises(CheckpointError, match="previous checkpoint is kept"):
        store.write(make_record(2, state=b"2" * size))  # the first write into the second slot syncs its folder
    monkeypatch.undo()
    assert store.latest("abcd1234-1.0") == make_record(1)
    assert valid_seqs(store) == [1] and no_temp_files(store)


def test_a_write_failure_fails_the_checkpoint_and_keeps_the_old_one(tmp_path, monkeypatch):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))

    def full_disk(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module.os, "write", full_disk)
    monkeypatch.setattr(store_module.os, "writev", full_disk)
    with pytest.raises(CheckpointError, match="No space left on device"):
        store.write(make_record(2))
    monkeypatch.undo()
    assert store.latest("abcd1234-1.0") == make_record(1)
    assert valid_seqs(store) == [1] and no_temp_files(store)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="needs root to mount a tiny tmpfs")
def test_a_really_full_disk_keeps_the_old_checkpoint(tmp_path):
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount_point)]).returncode:
        pytest.skip("cannot mount tmpfs here")
    try:
        store = CheckpointStore(mount_point)
        store.write(make_record(1, state=b"a" * 100_000))
        with pytest.raises(CheckpointError, match="previous checkpoint is kept"):
            store.write(make_record(2, state=b"b" * 1_000_000))
        assert store.latest("abcd1234-1.0") == make_record(1, state=b"a" * 100_000)
        assert valid_seqs(store) == [1] and no_temp_files(store)
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from frost_core.storage.checkpoints import CheckpointRecord, CheckpointStore
    store = CheckpointStore(Path(sys.argv[1]))
    seq = 1
    while True:
        state = bytes([seq % 251]) * (64 * 1024 * (1 + seq % 8))
        identity = dict(task_id="t-1.0", plugin_name="p", plugin_version="1", plugin_hash="h", unit_index=0,
                        epoch=1, seq=seq, taken_at=float(seq))
        if seq % 2:
            store.write(CheckpointRecord.seal(**identity, state=state))
        else:  # as a guest's state is written: while it comes up the pipe, then sealed
            incoming = store.receiving(len(state), **identity)
            incoming.filled(memoryview(state)[: len(state) // 2])
            store.commit(**identity, state=state, staged=incoming)
        print(seq, flush=True)
        seq += 1
    """
)


def test_kill_9_during_writes_never_leaves_an_unreadable_checkpoint(tmp_path):
    """A few random kills here; bench/checkpoint_crash.py runs a thousand."""
    rng = random.Random(1234)
    for trial in range(4):
        root = tmp_path / f"trial{trial}"
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(root)], stdout=subprocess.PIPE, text=True)
        assert writer.stdout is not None
        durable = int(writer.stdout.readline())  # wait for the first durable checkpoint
        time.sleep(rng.uniform(0.0, 0.15))
        writer.kill()
        writer.wait()
        remaining = writer.stdout.read().split()
        writer.stdout.close()
        if remaining:
            durable = int(remaining[-1])
        record = CheckpointStore(root).latest("t-1.0")
        assert record is not None and record.seq >= durable
        assert record.state == bytes([record.seq % 251]) * (64 * 1024 * (1 + record.seq % 8))


FORKER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from frost_core.storage.checkpoints import CheckpointStore
    store = CheckpointStore(Path(sys.argv[1]))
    identity = dict(task_id="t-1.0", plugin_name="p", plugin_version="1", plugin_hash="h", unit_index=0, epoch=1,
                    taken_at=1.0)
    store.commit(**identity, seq=1, state=os.urandom(2 << 20))  # hashed beside the write: the threads now wait
    pid = os.fork()
    if pid == 0:
        signal.alarm(15)  # gone even if it hangs (the test fails on its parent's timeout)
        store.commit(**identity, seq=2, state=os.urandom(2 << 20))
        os._exit(0)
    os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
    """
)


def test_a_forked_process_commits_with_threads_of_its_own(tmp_path):
    """The store's long-lived threads are not copied by fork: a child that found none would wait forever for its hash."""
    subprocess.run([sys.executable, "-c", FORKER, str(tmp_path)], check=True, timeout=20)
    assert CheckpointStore(tmp_path).latest("t-1.0").seq == 2


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_header_decoder_refuses_garbage_clearly(data):
    try:
        fields = decode_header(data)
    except CheckpointError as error:
        assert error.message
    else:
        assert isinstance(fields["task_id"], str)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=st.integers(min_value=0), flip=st.integers(min_value=1, max_value=255))
def test_any_single_byte_change_is_detected(tmp_path, position, flip):
    path = tmp_path / "one.ckpt"
    record = make_record(5, state=b"payload" * 20)
    data = bytearray(encode_header(record) + record.state)
    data[position % len(data)] ^= flip
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError):
        read_record(path)


@pytest.mark.parametrize("size", [10, 3 * 1024 * 1024], ids=["small", "hashed-while-written"])
def test_commit_seals_and_writes_in_one_go(tmp_path, size):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    fields = dict(task_id="abcd1234-1.0", plugin_name="counter", plugin_version="1", plugin_hash="f" * 64,
                  unit_index=0, epoch=3, seq=2, taken_at=1700000002.0, state=os.urandom(size))
    record = store.commit(**fields)
    record.verify()
    assert record == CheckpointRecord.seal(**fields)
    assert store.latest("abcd1234-1.0") == record


def unverified(record: CheckpointRecord, state: bytes | None = None) -> CheckpointRecord:
    """`record` as it arrives from a peer: fields and claimed hash, state possibly not the one hashed."""
    return dataclasses.replace(record, state=record.state if state is None else state, verified=False)


@pytest.mark.parametrize("size", [5000, 3 * 1024 * 1024], ids=["small", "hashed-while-written"])
def test_a_record_from_a_peer_is_checked_as_it_is_written(tmp_path, size):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    good = make_record(2, state=os.urandom(size))
    store.write(unverified(good))
    assert store.latest("abcd1234-1.0") == good
    damaged = bytearray(good.state)
    damaged[size // 2] ^= 0x40
    with pytest.raises(CheckpointError, match="SHA-256"):
        store.write(unverified(make_record(3, state=good.state), bytes(damaged)))
    assert store.latest("abcd1234-1.0") == good, "the copy before the damaged one is still there, whole"
    assert valid_seqs(store)[0] == 2 and no_temp_files(store)


def test_commit_that_fails_keeps_the_old_checkpoint(tmp_path, monkeypatch):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))

    def broken_disk(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(store_module.os, "fsync", broken_disk)
    monkeypatch.setattr(store_module.os, "fdatasync", broken_disk)
    with pytest.raises(CheckpointError, match="Input/output error"):
        store.commit(task_id="abcd1234-1.0", plugin_name="counter", plugin_version="1", plugin_hash="f" * 64,
                     unit_index=0, epoch=3, seq=2, taken_at=1.0, state=os.urandom(2 * 1024 * 1024))
    monkeypatch.undo()
    assert store.latest("abcd1234-1.0") == make_record(1)


def test_commit_accepts_the_state_in_pieces(tmp_path):
    store = CheckpointStore(tmp_path)
    pieces = [b"\xa1", b"dblob", b"\x5a\x00\x20\x00\x00", os.urandom(2 * 1024 * 1024)]
    record = store.commit(task_id="abcd1234-1.0", plugin_name="p", plugin_version="1", plugin_hash="h",
                          unit_index=0, epoch=1, seq=1, taken_at=1.0, state=pieces)
    assert record.state == b"".join(pieces)
    assert store.latest("abcd1234-1.0") == record


def staged(store: CheckpointStore, record: CheckpointRecord, state: bytes, handed: int) -> CheckpointRecord:
    """`record` as a moved-in checkpoint (announced at its own size) whose first `handed` bytes of
    `state` were written while they arrived."""
    incoming = store.incoming(record, record.size)
    view = memoryview(state)
    for start in range(0, handed, 256 * 1024):
        incoming.filled(view[start:min(start + 256 * 1024, handed)])
    incoming.wait_written()
    return dataclasses.replace(unverified(record, state), staged=incoming)


@pytest.mark.parametrize("handed", [0, 1000, 3 * 1024 * 1024], ids=["none", "part", "all"])
def test_a_checkpoint_written_while_it_arrives_reads_back_identically(tmp_path, handed):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    good = make_record(2, state=os.urandom(3 * 1024 * 1024))
    arriving = staged(store, good, good.state, handed)
    assert checkpoint_files(store)[0].startswith(".tmp-"), "written beside the old one, not in its place"
    store.write(arriving)
    assert read_record(tmp_path / good.task_id / f"{2:016d}.ckpt") == good
    assert checkpoint_files(store) == [f"{2:016d}.ckpt"]
    arriving.staged.abort()  # what the receiving side does after any start: a no-op once installed
    assert store.latest(good.task_id) == good


IDENTITY = dict(task_id="abcd1234-1.0", plugin_name="counter", plugin_version="1", plugin_hash="f" * 64,
                unit_index=0, epoch=3, seq=2, taken_at=1700000002.0)


@pytest.mark.parametrize("handed", [0, 1000, 3 * 1024 * 1024], ids=["none", "part", "all"])
def test_a_guests_checkpoint_written_while_it_comes_up_the_pipe_is_sealed_as_if_written_whole(tmp_path, handed):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    state = os.urandom(3 * 1024 * 1024)
    incoming = store.receiving(len(state), **IDENTITY)
    for start in range(0, handed, 256 * 1024):
        incoming.filled(memoryview(state)[start:min(start + 256 * 1024, handed)])
    assert checkpoint_files(store)[0].startswith(".tmp-"), "written beside the old one, not in its place"
    record = store.commit(**IDENTITY, state=state, staged=incoming)
    assert record == CheckpointRecord.seal(**IDENTITY, state=state)  # the same hash as a whole write's
    assert read_record(tmp_path / record.task_id / f"{2:016d}.ckpt") == record
    assert checkpoint_files(store) == [f"{2:016d}.ckpt"]


def test_a_capture_is_sealed_from_its_hash_before_its_fsync_and_installed_behind_as_if_written_whole(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    state = os.urandom(3 * 1024 * 1024)
    incoming = store.receiving(len(state), **IDENTITY)
    incoming.filled(memoryview(state)[:1024 * 1024])
    # A move sends the record as soon as its hash is known; the old checkpoint stays until it is installed.
    sealed = CheckpointRecord(**IDENTITY, state=state, sha256=incoming.digest(state), verified=True)
    assert sealed == CheckpointRecord.seal(**IDENTITY, state=state)
    assert store.latest("abcd1234-1.0") == make_record(1)
    store.write(dataclasses.replace(sealed, staged=incoming))
    assert store.latest("abcd1234-1.0") == sealed
    assert checkpoint_files(store) == [f"{2:016d}.ckpt"]


def test_a_guests_checkpoint_cut_off_on_the_pipe_leaves_the_old_one(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    incoming = store.receiving(4096, **IDENTITY)
    incoming.filled(memoryview(os.urandom(1000)))
    incoming.abort()  # the guest died mid-transfer
    with pytest.raises(CheckpointError, match="staged as another one"):
        store.commit(**{**IDENTITY, "seq": 3}, state=bytes(4096), staged=store.receiving(4096, **IDENTITY))
    assert no_temp_files(store)
    assert store.latest("abcd1234-1.0") == make_record(1)


def test_a_damaged_or_refused_checkpoint_written_while_it_arrives_leaves_the_old_one(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    good = make_record(2, state=os.urandom(1024 * 1024))
    damaged = bytearray(good.state)
    damaged[-1] ^= 1
    with pytest.raises(CheckpointError, match="SHA-256"):
        store.write(staged(store, good, bytes(damaged), len(damaged)))
    with pytest.raises(CheckpointError, match="not the 1048576 announced"):  # truncated
        store.write(staged(store, good, good.state[:-10], 1000))
    staged(store, good, good.state, 5000).staged.abort()  # the host did not take the unit
    assert no_temp_files(store)
    assert store.latest(good.task_id) == make_record(1)


# --- a guest's state handed over through its checkpoint memfd (guest/handoff.py) ---------------------------------

def handed(state: bytes) -> int:
    """A memfd holding `state`, as a guest fills it."""
    fd = os.memfd_create("frost-checkpoint", os.MFD_CLOEXEC)
    os.write(fd, state)
    return fd


def guest_hash(state: bytes, identity: dict = IDENTITY) -> str:
    """What the guest sends: the hash of the request's prefix and its state, taken without the store."""
    return hashlib.sha256(store_module.identity_prefix(identity) + state).hexdigest()


def known(value: str) -> Future:
    future: Future = Future()
    future.set_result(value)
    return future


memfd_only = pytest.mark.skipif(not hasattr(os, "memfd_create") or not hasattr(os, "splice"), reason="Linux's")


@memfd_only
@pytest.mark.parametrize("size", [1000, 3 * 1024 * 1024], ids=["small", "big"])
@pytest.mark.parametrize("copy", ["splice", "sendfile"])
def test_a_state_handed_through_a_memfd_is_copied_bit_identical_and_sealed_as_if_written_whole(
        tmp_path, monkeypatch, size, copy):
    if copy == "sendfile":
        monkeypatch.delattr(os, "splice")  # as before Python 3.10
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    state = os.urandom(size)
    fd = handed(state)
    try:
        record = store.copy_handed(fd, size, size, known(guest_hash(state)), **IDENTITY).result()
    finally:
        os.close(fd)
    assert isinstance(record, store_module.StoredCheckpoint) and record.size == size
    assert record == CheckpointRecord.seal(**IDENTITY, state=state)  # the same hash and bytes as a whole write's
    assert not record.verified and record.verify().verified  # the guest's hash, checked where asked
    assert read_record(file_of(store, 2)).state == state  # checked on read
    assert valid_seqs(store) == [2, 1] and no_temp_files(store)
    store.commit(**{**IDENTITY, "seq": 3}, state=b"newer")  # into the other slot
    store.commit(**{**IDENTITY, "seq": 4}, state=b"newest")  # round to the record's slot: beside it, renamed over
    assert record.state == state  # the record still reads its bytes, through the fd it keeps
    assert valid_seqs(store) == [4, 3] and no_temp_files(store)
    store.commit(**{**IDENTITY, "seq": 5}, state=b"5")
    store.commit(**{**IDENTITY, "seq": 6}, state=b"6")  # in place: the renamed file has no reader
    assert store.latest("abcd1234-1.0").seq == 6 and record.state == state


def test_a_state_committed_into_a_slot_has_its_header_encoded_once(tmp_path, monkeypatch):
    """The header's CBOR, in pure Python, costs tens of microseconds cold: a small state's commit pays it once."""
    store = CheckpointStore(tmp_path)
    headers = []
    real_header = store_module.encode_header
    monkeypatch.setattr(store_module, "encode_header", lambda *args: headers.append(args) or real_header(*args))
    record = store.commit(**IDENTITY, state=b"s" * 100_000)
    assert len(headers) == 1 and read_record(file_of(store, 2)) == record


@memfd_only
def test_a_memfd_shorter_than_announced_or_a_state_over_the_limit_fails_cleanly_and_keeps_the_old_one(tmp_path):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    state = os.urandom(2 * 1024 * 1024)
    fd = handed(state)
    try:
        os.ftruncate(fd, len(state) // 2)  # a guest that cut its memfd (or lied about its size)
        with pytest.raises(CheckpointError, match="holds 1048576 bytes, not the 2097152"):
            store.copy_handed(fd, len(state), 1 << 30, known(guest_hash(state)), **IDENTITY).result()
        with pytest.raises(CheckpointError, match="over the limit of 1000"):
            store.copy_handed(fd, 1001, 1000, known(guest_hash(state)), **IDENTITY).result()
        with pytest.raises(CheckpointError, match="malformed hash"):
            store.copy_handed(fd, 1000, 1000, known("../" * 22), **IDENTITY).result()
        never: Future = Future()
        never.set_exception(CheckpointError("the guest's hash of its checkpoint never came"))
        with pytest.raises(CheckpointError, match="never came"):
            store.copy_handed(fd, 1000, 1000, never, **IDENTITY).result()
    finally:
        os.close(fd)
    assert valid_seqs(store) == [1] and no_temp_files(store)
    assert store.latest("abcd1234-1.0") == make_record(1)


@memfd_only
def test_a_guest_that_lies_about_its_hash_ruins_only_that_checkpoint_which_fails_its_check_on_read(tmp_path, caplog):
    store = CheckpointStore(tmp_path)
    state = os.urandom(5000)
    fd = handed(state)
    try:
        store.copy_handed(fd, len(state), 1 << 20, known(guest_hash(b"another state")), **IDENTITY).result()
    finally:
        os.close(fd)
    with pytest.raises(CheckpointError, match="SHA-256"):
        read_record(store.files("abcd1234-1.0")[0])
    with caplog.at_level(logging.WARNING, logger="frost.checkpoints"):
        assert store.latest("abcd1234-1.0") is None  # no guest resumes from it
    assert "skipping unreadable checkpoint" in caplog.text


@memfd_only
def test_a_handed_state_still_being_written_is_copied_as_it_grows_until_its_hash_comes(tmp_path):
    store = CheckpointStore(tmp_path)
    state = os.urandom(3 * 1024 * 1024)
    fd = handed(b"")  # announced before the guest writes it (a state past KEEP_OUTBOX_BYTES)
    try:
        sha256: Future = Future()
        copying = store.copy_handed(fd, len(state), 1 << 30, sha256, **IDENTITY)
        for start in range(0, len(state), 256 * 1024):
            os.write(fd, state[start:start + 256 * 1024])
            time.sleep(0.001)
        sha256.set_result(guest_hash(state))
        record = copying.result()
    finally:
        os.close(fd)
    assert record == CheckpointRecord.seal(**IDENTITY, state=state)
    assert store.latest("abcd1234-1.0") == record


@pytest.mark.parametrize("size", [5000, 3 * 1024 * 1024], ids=["small", "hashed-while-written"])
def test_a_guests_state_with_its_hash_after_it_is_written_first_then_sealed_with_that_hash(tmp_path, size):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    state = os.urandom(size)
    on_disk_when_asked = []

    def claimed() -> str:  # the guest hashes while the node writes: the state is on its way to disk when asked
        on_disk_when_asked.append(any(state in path.read_bytes() for path in store.files("abcd1234-1.0")))
        return guest_hash(state)

    record = store.commit_claimed(state, claimed, **IDENTITY)
    assert on_disk_when_asked == [True]
    assert record == CheckpointRecord.seal(**IDENTITY, state=state) and record.state == state
    assert not record.verified, "the guest's claim: checked where it is read, as a peer's copy is"
    assert store.latest("abcd1234-1.0") == record
    assert no_temp_files(store)


@pytest.mark.parametrize("claim", ["malformed", "never came", "a lie"])
def test_a_hash_after_the_state_that_is_malformed_never_comes_or_lies_leaves_the_checkpoint_before(tmp_path, claim):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    state = os.urandom(5000)

    def claimed() -> str:
        if claim == "never came":
            raise CheckpointError("the guest's hash did not come")
        return "not a hash" if claim == "malformed" else guest_hash(b"another state")

    if claim == "a lie":
        store.commit_claimed(state, claimed, **IDENTITY)  # only reading it can tell
    else:
        with pytest.raises(CheckpointError, match="malformed hash|did not come"):
            store.commit_claimed(state, claimed, **IDENTITY)
    assert store.latest("abcd1234-1.0") == make_record(1), "no guest resumes from the new one"
    assert no_temp_files(store)


@pytest.mark.parametrize("ends", ["before its hash", "with another message"])
def test_a_guest_whose_pipe_fails_between_its_state_and_its_hash_leaves_the_checkpoint_before(tmp_path, ends):
    store = CheckpointStore(tmp_path)
    store.write(make_record(1))
    state = os.urandom(5000)
    read_end, write_end = os.pipe()
    with os.fdopen(write_end, "wb") as guest:
        write_bulk(guest, GuestCheckpoint(request_id=7, progress=0.5, steps=1, encode_seconds=0.0, hash_follows=True),
                   state)
        if ends == "with another message":
            write_frame(guest, GuestProgress(progress=0.6, steps=2))
    outcomes = []

    def commit(data: bytes, claimed) -> None:
        try:
            store.commit_claimed(data, claimed, **IDENTITY)
        except CheckpointError as error:
            outcomes.append(error)

    pipe = LentPipe(read_end, b"")
    try:
        with pytest.raises(EOFError if ends == "before its hash" else ProtocolError):
            answer_up_the_pipe(pipe, 7, 1 << 20, commit, take=lambda: True)
    finally:
        pipe.close()
        os.close(read_end)
    assert len(outcomes) == 1 and "did not come" in outcomes[0].message
    assert store.latest("abcd1234-1.0") == make_record(1)
    assert no_temp_files(store) and len(store.files("abcd1234-1.0")) == 1, "the slot it began is gone again"
