"""The control socket carries typed commands and queries, checked against their type hints both ways."""

import socket
import threading

import pytest
import trio

from frost_core.api.commands import MoveTask, ResumeHosting
from frost_core.api.errors import FrostError, ProtocolError
from frost_core.api.queries import GetAssignment
from frost_core.api.snapshot import AssignmentView, UnitView
from frost_core.config import Paths
from frost_core.node.control import ControlReply, ControlRequest, call_node, serve_control
from frost_core.wire.codec import encode
from frost_core.wire.messages import MAX_MESSAGE_SIZE, to_plain
from frost_core.wire.pipe import read_frame, write_frame


async def _serving(tmp_path, handler, client):
    """Serve `handler` on a real socket in tmp_path and run the blocking `client(paths)` in a thread."""
    paths = Paths.resolve(config_file=tmp_path / "config.toml", data_dir=tmp_path)
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_control, paths.control_socket, handler, _no_attach)
        try:
            return await trio.to_thread.run_sync(client, paths)
        finally:
            nursery.cancel_scope.cancel()


async def _no_attach(*args):
    raise AssertionError("these clients never attach")


def _send_raw(paths, request):
    """What a client that skips call_node's typing could send."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(paths.control_socket))
        with sock.makefile("rwb") as pipe:
            write_frame(pipe, request)
            pipe.flush()
            return read_frame(pipe)


async def test_a_command_arrives_typed_and_its_reply_comes_back_typed(tmp_path):
    received = []

    async def handler(request):
        received.append(request)
        return "moved"

    reply = await _serving(tmp_path, handler, lambda paths: call_node(paths, MoveTask(task_id="a1.0", node="bob")))
    assert received == [MoveTask(task_id="a1.0", node="bob")]
    assert reply == "moved"


async def test_a_request_with_a_wrongly_typed_field_is_refused_naming_the_field(tmp_path):
    async def handler(request):
        raise AssertionError(f"the node must never see {request!r}")

    request = ControlRequest(kind="MoveTask", fields=encode({"task_id": 7, "node": "bob"}))
    reply = await _serving(tmp_path, handler, lambda paths: _send_raw(paths, request))
    assert isinstance(reply, ControlReply) and not reply.ok
    assert "bad MoveTask" in reply.error_message and "'task_id'" in reply.error_message


async def test_an_unknown_request_is_refused(tmp_path):
    async def handler(request):
        raise AssertionError("unreachable")

    request = ControlRequest(kind="FormatDisk", fields=encode({}))
    reply = await _serving(tmp_path, handler, lambda paths: _send_raw(paths, request))
    assert not reply.ok and "unknown control request 'FormatDisk'" in reply.error_message


def test_a_reply_that_is_not_the_declared_type_is_refused_by_the_client(tmp_path):
    paths = Paths.resolve(config_file=tmp_path / "config.toml", data_dir=tmp_path)

    def impostor(listener):  # answers like a node of another version would
        connection, _ = listener.accept()
        with connection, connection.makefile("rwb") as pipe:
            read_frame(pipe)
            write_frame(pipe, ControlReply(ok=True, body=encode("not an assignment")))
            pipe.flush()

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(paths.control_socket))
        listener.listen(1)
        thread = threading.Thread(target=impostor, args=(listener,))
        thread.start()
        try:
            with pytest.raises(ProtocolError, match="expected a map"):
                call_node(paths, GetAssignment(assignment_id="a1"))
        finally:
            thread.join(timeout=10)


async def test_a_refusal_keeps_the_nodes_title_and_message(tmp_path):
    async def handler(request):
        raise FrostError("nothing to resume", title="Not paused")

    def ask(paths):
        with pytest.raises(FrostError) as refused:
            call_node(paths, ResumeHosting())
        return refused.value

    error = await _serving(tmp_path, handler, ask)
    assert (error.title, error.message) == ("Not paused", "nothing to resume")


async def test_an_assignment_of_ten_thousand_units_comes_back_whole(tmp_path):
    """A parameter sweep's assignment is megabytes as a reply, over one frame's cap: it travels as bulk chunks."""
    units = tuple(
        UnitView(index=i, task_id=f"a1.{i}", state="queued", host="", progress=0.0, moves=0, failures=0, error=None,
                 waiting="no peer with free CPU: every guest slot is taken")
        for i in range(10_000)
    )
    sweep = AssignmentView(id="a1", plugin="montecarlo-pi", state="running", progress=0.0, created_at=1.0,
                           finished_at=None, eta_seconds=None, params={"units": 10_000}, units=units,
                           result_media_type=None, result_filename=None, result_path=None, error=None)

    async def handler(request):
        return sweep

    reply = await _serving(tmp_path, handler, lambda paths: call_node(paths, GetAssignment(assignment_id="a1")))
    assert len(encode(to_plain(AssignmentView, sweep))) > MAX_MESSAGE_SIZE
    assert reply == sweep


async def test_a_bug_behind_one_reply_is_an_error_for_that_client_and_the_node_answers_the_next(tmp_path):
    calls = []

    async def handler(request):
        calls.append(request)
        if len(calls) == 1:
            raise ValueError("a view that cannot be built")
        return "moved"

    def ask_twice(paths):
        with pytest.raises(FrostError) as failed:
            call_node(paths, MoveTask(task_id="a1.0", node="bob"))
        return failed.value, call_node(paths, MoveTask(task_id="a1.0", node="bob"))

    (error, second) = await _serving(tmp_path, handler, ask_twice)
    assert error.title == "Internal error" and "ValueError: a view that cannot be built" in error.message
    assert second == "moved"
