"""Which node `frost-tui` shows: --attach first, then the configured hosts, each with its remembered owner token."""

from __future__ import annotations

import stat

import pytest
import trio

from frost_core import (
    ClusterKey, ConfigError, NodeUnavailableError, Paths, load_config, remember_owner_token, remembered_owner_token,
)
from frost_core.node.attached import AttachedNode
from frost_tui.targets import DEFAULT_CONTROL_PORT, attach_address, choose_targets
from tests.waiting import wait_until


def _config(tmp_path, hosts=()):
    (tmp_path / "config.toml").write_text(f"[control]\nhosts = {list(hosts)!r}\n".replace("'", '"'))
    return load_config(Paths.resolve(config_file=tmp_path / "config.toml", data_dir=tmp_path / "data"))


@pytest.mark.parametrize(("text", "address"), [
    ("desk2", ("desk2", DEFAULT_CONTROL_PORT)),
    ("desk2:4000", ("desk2", 4000)),
    ("[::1]:4000", ("::1", 4000)),
])
def test_attach_address(text, address):
    assert attach_address(text) == address


def test_no_node_here_and_nothing_to_attach_to_means_embedded_and_watch_then_fails(tmp_path):
    config = _config(tmp_path)
    assert choose_targets(config, attach=None, watch=False) is None
    with pytest.raises(NodeUnavailableError, match="none to watch"):
        choose_targets(config, attach=None, watch=True)


def test_attach_comes_first_then_the_host_list_each_with_its_remembered_token(tmp_path):
    config = _config(tmp_path, hosts=["lab:47632", "desk2:47632"])
    for host in ("desk2", "lab"):
        path = remember_owner_token(config.paths.data_dir, (host, DEFAULT_CONTROL_PORT), ClusterKey.generate())
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    targets = choose_targets(config, attach="desk2", watch=False)
    assert [t.where for t in targets] == ["desk2:47632", "lab:47632"]


def test_a_host_without_a_remembered_token_says_how_to_get_one(tmp_path):
    config = _config(tmp_path)
    with pytest.raises(ConfigError, match="frost-tui key remember desk2:47632 TOKEN"):
        choose_targets(config, attach="desk2", watch=False)  # stdin is not a terminal here: no prompt


def test_a_listed_host_with_no_token_kept_does_not_stop_the_ui_and_says_how_to_get_one_when_reached(tmp_path):
    """Before, `frost-tui` with a service node running here would not open at all (Owner token needed) while any host
    of control.hosts had no token kept."""
    config = _config(tmp_path, hosts=["lab:47632"])
    remember_owner_token(config.paths.data_dir, ("desk2", DEFAULT_CONTROL_PORT), ClusterKey.generate())
    targets = choose_targets(config, attach="desk2", watch=False)
    assert [t.where for t in targets] == ["desk2:47632", "lab:47632"]
    attached = AttachedNode(targets[1:])

    async def main():
        async with trio.open_nursery() as nursery:
            await nursery.start(attached.serve)
            await wait_until(lambda: attached.link().problem, timeout=10, what="the missing token said")
            nursery.cancel_scope.cancel()

    trio.run(main)
    assert attached.link().describe() == "no owner token: lab:47632"
    assert attached.snapshot().hosting.reason == ("no owner token for it is kept here: `frost-tui key owner-token` "
                                                  "there, then `frost-tui key remember lab:47632 TOKEN` here.")


def test_a_token_typed_at_the_prompt_is_kept_only_once_the_node_has_taken_it(tmp_path, monkeypatch):
    config = _config(tmp_path)
    token = ClusterKey.generate()
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("getpass.getpass", lambda prompt: token.to_join_code() + "\n")
    [target] = choose_targets(config, attach="desk2", watch=False)
    assert remembered_owner_token(config.paths.data_dir, ("desk2", DEFAULT_CONTROL_PORT)) is None  # (mistyped, maybe)
    target.attached()   # what AttachedNode calls once the node took the token
    assert remembered_owner_token(config.paths.data_dir, ("desk2", DEFAULT_CONTROL_PORT)) == token


def test_a_system_service_node_is_found_in_the_data_dir_by_a_ui_that_has_a_runtime_dir(tmp_path, monkeypatch):
    """A system unit has no $XDG_RUNTIME_DIR, so its socket is in the data dir; the owner's terminal has one."""
    import socket

    runtime = tmp_path / "runtime"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    config = _config(tmp_path)
    config.paths.data_dir.mkdir()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(config.paths.data_dir_control_socket))
        listener.listen(1)
        targets = choose_targets(config, attach=None, watch=True)
    assert [t.where for t in targets] == ["local node"]
