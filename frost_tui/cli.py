"""The `frost-tui` command: the terminal UI by default, a headless node, and the local control verbs.

Every verb that talks to a running node goes through its control socket in the data dir, so
`--data-dir` picks which local node answers; a verb exits non-zero with a clear message when
no node answers or the node refuses.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from frost_core import OPTIONS, ConfigError, FrostError, Paths, describe_options, load_config, parse_address

from frost_tui import tables

# Options that run a node; every verb also accepts --data-dir and --config.
_NODE_FLAGS = {
    "name": "node.name",
    "listen_host": "node.listen_host",
    "port": "node.port",
    "advertise_host": "node.advertise_host",
    "broadcast_address": "node.broadcast_address",
    "seed": "node.seeds",
    "cluster_key_file": "cluster.key_file",
    "log_level": "log.level",
}


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", type=Path, default=argparse.SUPPRESS,
                        help="this node's state directory (default: the platform's data dir)")
    common.add_argument("--config", type=Path, default=argparse.SUPPRESS,
                        help="configuration file (default: config.toml in the platform's config dir)")
    common.add_argument("--cluster-key-file", default=argparse.SUPPRESS,
                        help="file holding the cluster key (default: cluster.key in the data dir)")

    parser = argparse.ArgumentParser(
        prog="frost-tui", parents=[common],
        description="Share idle CPU with your peers. Without a command: open the terminal UI.",
    )
    node = parser.add_argument_group("running a node")
    node.add_argument("--headless", action="store_true", help="run the node without the UI (servers, tests, systemd)")
    node.add_argument("--name", help="name shown to peers")
    node.add_argument("--listen-host", help="address to listen on")
    node.add_argument("--port", type=int, help="UDP and TCP port (0 picks a free one)")
    node.add_argument("--advertise-host", help="address peers use to reach this node")
    node.add_argument("--broadcast-address", help="discovery broadcast address ('' turns broadcast off)")
    node.add_argument("--seed", action="append", metavar="HOST:PORT", help="peer to join through (repeatable)")
    node.add_argument("--log-level", choices=("debug", "info", "warning", "error"))

    verbs = parser.add_subparsers(dest="verb", metavar="COMMAND")

    def verb(name: str, help_text: str) -> argparse.ArgumentParser:
        return verbs.add_parser(name, parents=[common], help=help_text, description=help_text)

    for name, help_text in (("status", "this node's state and its guests"), ("peers", "the cluster's resource table")):
        verb(name, help_text).add_argument("--json", action="store_true", help="machine-readable output")

    key = verb("key", "show or change the cluster key")
    key_verbs = key.add_subparsers(dest="key_verb", metavar="ACTION", required=True)
    key_verbs.add_parser("show", parents=[common], help="print this cluster's join code")
    key_set = key_verbs.add_parser("set", parents=[common], help="join another cluster with its join code")
    key_set.add_argument("code")
    key_verbs.add_parser("owner-token", parents=[common],
                         help="print this node's owner token (what `--attach` from another machine asks for)")

    service = verb("service", "run the node as a systemd service, or stop doing so")
    service_verbs = service.add_subparsers(dest="service_verb", metavar="ACTION", required=True)
    for action, help_text in (("install", "write, enable and start the systemd unit"),
                              ("uninstall", "stop, disable and remove the systemd unit")):
        service_action = service_verbs.add_parser(action, parents=[common], help=help_text)
        where = service_action.add_mutually_exclusive_group()
        where.add_argument("--user", action="store_false", dest="system",
                           help="a user unit: runs while you are logged in, or always with linger (default)")
        where.add_argument("--system", action="store_true", dest="system", help="a system unit: runs from boot")

    plugins = verb("plugins", "list calculation plugins, or add one")
    plugins.add_argument("--json", action="store_true", help="machine-readable output")
    plugin_verbs = plugins.add_subparsers(dest="plugin_verb", metavar="ACTION")
    plugin_add = plugin_verbs.add_parser("add", parents=[common], help="add a plugin file or folder")
    plugin_add.add_argument("path", type=Path)

    submit = verb("submit", "submit an assignment")
    submit.add_argument("plugin")
    submit.add_argument("--param", action="append", default=[], metavar="K=V", help="a plugin parameter (repeatable)")
    submit.add_argument("--wait", action="store_true", help="wait until the assignment finishes")
    submit.add_argument("--output", type=Path, help="with --wait: save the result here")
    submit.add_argument("--one-per-host", action="store_true",
                        help="at most one unit of this assignment per host (default: one per free core)")
    submit.add_argument("--input", action="append", default=[], metavar="NAME=PATH",
                        help="an input file the plugin opens by NAME; it stays on this machine (repeatable)")

    verb("assignments", "my assignments and their units").add_argument("--json", action="store_true")
    result = verb("result", "save an assignment's result")
    result.add_argument("assignment")
    result.add_argument("--output", type=Path, required=True)
    result.add_argument("--files", type=Path, metavar="DIR", help="also save the units' output files into DIR")
    verb("cancel", "cancel an assignment").add_argument("assignment")

    pause = verb("pause", "stop every guest at once and take no new ones")
    pause.add_argument("--until", metavar="HH:MM", help="resume by itself at this time")
    verb("resume", "let guests run again")
    verb("evict", "checkpoint guests and send them away").add_argument("task", nargs="?")
    move = verb("move", "move a running unit to another peer (a guest here, or a unit of an assignment of this node)")
    move.add_argument("task", help="the unit's task id, ASSIGNMENT.UNIT")
    move.add_argument("node", help="the destination: a peer's name, node id or node id prefix")
    verb("finish", "take nothing new and pause once the current guests finish")
    verb("config", "show every option, its value and its meaning")
    verb("measure", "measure again what a guest gets here on an idle and on a busy machine").add_argument(
        "--json", action="store_true", help="machine-readable output")
    shots = verb("screenshots", "render a PNG (and SVG) of every screen into a folder")
    shots.add_argument("--out", type=Path, default=Path("screenshots"), help="folder (default: screenshots)")
    shots.add_argument("--live", action="store_true",
                       help="take them from a real cluster of four nodes started on loopback for ~1 minute "
                            "(default: a fixed demo state)")
    verbs.add_parser("simulate", help="compare load-balancing policies in a discrete-event simulation",
                     add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["simulate"]:
        from frost_core import run_simulator as simulate  # the simulator parses its own options

        return simulate(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _dispatch(args)
    except FrostError as error:
        print(f"frost-tui: {error.title}: {error.message}", file=sys.stderr)
        return 2 if isinstance(error, ConfigError) else 1
    except KeyboardInterrupt:
        return 130


def _paths(args: argparse.Namespace) -> Paths:
    return Paths.resolve(config_file=getattr(args, "config", None), data_dir=getattr(args, "data_dir", None))


def _node_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for flag, option in _NODE_FLAGS.items():
        value = getattr(args, flag, None)
        if value is not None:
            overrides[option] = value
    for seed in overrides.get("node.seeds", []):
        parse_address(seed, option="--seed")
    return overrides


def _dispatch(args: argparse.Namespace) -> int:
    paths = _paths(args)
    if args.verb is None:
        config = load_config(paths, _node_overrides(args))
        if args.headless:
            from frost_core import run_headless

            return run_headless(config)
        from frost_tui.app import run_app

        return run_app(config)
    if args.verb == "key":
        return _key(args, paths)
    if args.verb == "config":
        return _show_config(paths)
    if args.verb == "service":
        return _service(args, paths)
    if args.verb == "measure":
        return _measure(args, paths)
    if args.verb == "screenshots":
        from frost_tui.shots import render_screenshots

        for path in render_screenshots(args.out, live=args.live):
            print(path)
        return 0
    return _control_verb(args, paths)


def _key(args: argparse.Namespace, paths: Paths) -> int:
    from frost_core import ClusterKey

    config = load_config(paths, _node_overrides(args))
    if args.key_verb == "owner-token":
        from frost_core import load_owner_token

        print(load_owner_token(paths.data_dir).to_join_code())
        return 0
    if args.key_verb == "show":
        print(ClusterKey.load_or_create(config.cluster_key_file).to_join_code())
        return 0
    key = ClusterKey.from_join_code(args.code.strip())
    key.save(config.cluster_key_file)
    print(f"Saved the cluster key to {config.cluster_key_file}. Restart the node to join that cluster.")
    return 0


def _service(args: argparse.Namespace, paths: Paths) -> int:
    from frost_tui import service

    config = load_config(paths)
    reason = service.systemd_missing_reason()
    if reason is not None:
        print(service.without_systemd(reason, config), file=sys.stderr)
        return 1
    scope = service.Scope(system=args.system)
    if args.service_verb == "install":
        lines = service.install(config, scope, executable=str(Path(sys.argv[0]).resolve()))
    else:
        lines = service.uninstall(scope)
    print("\n".join(lines))
    return 0


def _show_config(paths: Paths) -> int:
    config = load_config(paths)
    print(f"# configuration file: {paths.config_file}{'' if paths.config_file.exists() else ' (not created yet)'}")
    print(f"# data dir: {paths.data_dir}\n# log dir: {paths.log_dir}\n")
    for option in OPTIONS:
        print(f"{option.name} = {config.get(option.name)!r}")
    print()
    print(describe_options())
    return 0


def _measure(args: argparse.Namespace, paths: Paths) -> int:
    """The running node measures (and uses the figures at once); with none running, this process does."""
    from dataclasses import asdict

    from frost_core import Measurement, NodeUnavailableError, Remeasure, call_node, load_or_measure

    try:
        figures = call_node(paths, Remeasure())
        where = "the running node uses them from now on"
    except NodeUnavailableError:
        figures = Measurement(**asdict(load_or_measure(paths.extremities_file, remeasure=True)))
        where = "no node is running here; it uses them from its next start"
    if args.json:
        print(json.dumps(asdict(figures), indent=2))
        return 0
    print(f"speed {figures.speed:.3f} per CPU, {figures.cpus} CPU(s)\n"
          f"idle machine: guests get {figures.idle:.3f} speed units\n"
          f"busy machine: guests get {figures.heavy:.3f} speed units\n"
          f"saved to {paths.extremities_file}; {where}")
    return 0


def _control_verb(args: argparse.Namespace, paths: Paths) -> int:
    from frost_core import (
        CancelAssignment,
        EvictGuests,
        FetchResult,
        FinishThenPause,
        GetStatus,
        ListAssignments,
        ListPeers,
        MoveTask,
        PauseHosting,
        ResumeHosting,
        call_node,
        plain_reply,
    )

    verb = args.verb
    if verb in ("status", "peers", "assignments"):
        request = {"status": GetStatus, "peers": ListPeers, "assignments": ListAssignments}[verb]()
        reply = plain_reply(request, call_node(paths, request))
        table = {"status": tables.status, "peers": tables.peers, "assignments": tables.assignments}[verb]
        print(json.dumps(reply, indent=2) if args.json else table(reply))
    elif verb == "plugins":
        return _plugins(args, paths)
    elif verb == "submit":
        return _submit(args, paths)
    elif verb == "result":
        saved = call_node(paths, FetchResult(
            assignment_id=args.assignment, output=str(args.output.resolve()),
            files=str(args.files.resolve()) if args.files else None))
        print(f"Saved {saved.bytes} bytes ({saved.media_type}) to {saved.path}")
        if args.files:
            print(f"Saved {len(saved.files)} output file(s) to {saved.files_folder}")
    elif verb == "cancel":
        call_node(paths, CancelAssignment(assignment_id=args.assignment))
        print(f"Cancelled {args.assignment}.")
    elif verb == "pause":
        from frost_core import parse_until

        until = parse_until(args.until, now=time.time()) if args.until else None
        print(call_node(paths, PauseHosting(until=until)))
    elif verb == "resume":
        print(call_node(paths, ResumeHosting()))
    elif verb == "finish":
        print(call_node(paths, FinishThenPause()))
    elif verb == "evict":
        print(call_node(paths, EvictGuests(task_id=args.task)))
    elif verb == "move":
        print(call_node(paths, MoveTask(task_id=args.task, node=args.node)))
    return 0


def _plugins(args: argparse.Namespace, paths: Paths) -> int:
    """Through the running node when there is one (it then knows at once), else on the data dir directly."""
    from frost_core import (
        AddPlugin,
        ListPlugins,
        NodeUnavailableError,
        PluginRegistry,
        call_node,
        plain_reply,
        plugin_view,
    )

    adding = args.plugin_verb == "add"
    try:
        if adding:
            views = (call_node(paths, AddPlugin(path=str(args.path.resolve()))),)
        else:
            views = call_node(paths, ListPlugins())
    except NodeUnavailableError:
        registry = PluginRegistry(paths.data_dir)
        views = tuple(plugin_view(info) for info in ([registry.add(args.path.resolve())] if adding else registry.scan()))
    reply = plain_reply(ListPlugins(), views)
    print(json.dumps(reply, indent=2) if getattr(args, "json", False) else tables.plugins(reply))
    return 0 if all(view.ok for view in views) or not adding else 1


def _submit(args: argparse.Namespace, paths: Paths) -> int:
    from frost_core import FetchResult, GetAssignment, SubmitAssignment, call_node

    params = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--param wants K=V, not {item!r}")
        params[key] = value
    if args.output and not args.wait:
        raise ConfigError("--output needs --wait (or use `frost-tui result ID --output PATH` later)")
    submitted = call_node(paths, SubmitAssignment(plugin=args.plugin, params=params, one_per_host=args.one_per_host,
                                                  inputs=_input_files(args.input)))
    print(f"Submitted {submitted.id}: {submitted.units} unit(s) of {args.plugin}.")
    if not args.wait:
        return 0
    while True:
        state = call_node(paths, GetAssignment(assignment_id=submitted.id))
        if state.state in ("done", "failed", "cancelled"):
            break
        time.sleep(0.5)
    if state.state != "done":
        print(f"Assignment {submitted.id} {state.state}: {state.error or ''}", file=sys.stderr)
        return 1
    if args.output:
        saved = call_node(paths, FetchResult(assignment_id=submitted.id, output=str(args.output.resolve())))
        print(f"Saved {saved.bytes} bytes ({saved.media_type}) to {saved.path}")
    else:
        print(f"Assignment {submitted.id} is done.")
    return 0


def _input_files(items: list[str]) -> dict[str, str]:
    """`--input NAME=PATH` options as {name: absolute path}; the node checks the names and copies the files."""
    inputs: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise ConfigError(f"--input wants NAME=PATH, not {item!r}")
        if name in inputs:
            raise ConfigError(f"--input {name} is given twice")
        resolved = Path(path).expanduser().resolve()
        if not resolved.is_file():
            raise ConfigError(f"--input {name}: {path} is not a file" if resolved.exists()
                              else f"--input {name}: {path} does not exist")
        inputs[name] = str(resolved)
    return inputs


if __name__ == "__main__":
    sys.exit(main())
