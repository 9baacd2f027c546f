"""The `frost-tui` command: the terminal UI by default, a headless node, and the local control verbs.

Every verb that talks to a running node sends it a typed command or query over its control
socket, so `--data-dir` picks which local node answers. The contract scripts rely on is in
docs/cli.md: `--json` output in a versioned envelope, and the exit codes below.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from frost_core import (
    OPTIONS, AssignmentView, ConfigError, FoundUnits, FrostError, LedgerView, Measurement, NodeStatus, NodeUnavailableError,
    Paths, PeerView, PluginError, PluginView, SavedResult, Submitted, counted, describe_options, load_config, parse_address,
)

from frost_tui import tables
from frost_tui.check_every import parse_check_every
from frost_tui.shots import HISTORY_SECONDS, MAX_HISTORY_SECONDS, MIN_HISTORY_SECONDS, render_screenshots

JSON_SCHEMA_VERSION = 1
"""The `schema` field of every `--json` document; raised when a shape changes incompatibly."""

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_NO_NODE, EXIT_INTERRUPTED, EXIT_READER_GONE = 0, 1, 2, 3, 130, 141
EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_REFUSED: "the node (or the data dir) refused: an unknown id, a broken plugin, a failed assignment",
    EXIT_USAGE: "usage or configuration error: a bad flag, a missing --config file, a missing data dir or key",
    EXIT_NO_NODE: "no node is running with this data dir",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
    EXIT_READER_GONE: "the reader of the output went away (`frost-tui config | head`); nothing more is printed",
}

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


@dataclass(frozen=True)
class KeyResult:
    key_file: str
    join_code: str = ""  # `key show` only: the secret others join with


@dataclass(frozen=True)
class ConfigResult:
    config_file: str
    config_file_exists: bool
    data_dir: str
    log_dir: str
    values: dict[str, Any]


@dataclass(frozen=True)
class SetResult:
    config_file: str
    values: dict[str, Any]
    applied: bool               # a running node took them (else they act when one starts)
    waiting_for_restart: str    # what of them acts only once the node (or the UI) starts again; "" for none


@dataclass(frozen=True)
class SubmitResult:
    id: str
    units: int
    assignment: AssignmentView | None = None  # with --wait: how it ended
    saved: SavedResult | None = None          # with --wait --output


RESULTS: dict[str, Any] = {
    "status": NodeStatus, "peers": tuple[PeerView, ...], "plugins": tuple[PluginView, ...],
    "plugins show": PluginView, "plugins add": tuple[PluginView, ...], "plugins remove": str, "assignments": tuple[AssignmentView, ...],
    "units": FoundUnits, "submit": SubmitResult,
    "result": SavedResult, "cancel": str, "pause": str, "resume": str, "finish": str, "evict": str, "move": str, "unquarantine": str,
    "key show": KeyResult, "key set": KeyResult, "key owner-token": str,
    "key remember": KeyResult,
    "service install": tuple[str, ...], "service uninstall": tuple[str, ...], "config": ConfigResult,
    "config set": SetResult, "measure": Measurement,
    "screenshots": tuple[str, ...], "completion": str, "stats": LedgerView,
}
"""The type of `result` in each command's `--json` document (docs/cli.schema.json is built from it)."""


class UsageError(ConfigError):
    """The command line itself is wrong (argparse's complaint), reported like any configuration error."""

    title = "Usage"


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so `--json` can report a bad command line as JSON too."""

    def error(self, message: str):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


class _Output:
    """Text goes out as the command runs; under `--json` one document is printed at the end instead."""

    def __init__(self, as_json: bool) -> None:
        self.json = as_json

    def say(self, text: str, *, file=None) -> None:
        if not self.json:
            print(text, file=file or sys.stdout, flush=True)


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--data-dir", type=Path, default=argparse.SUPPRESS,
                        help="this node's state directory (default: the platform's data dir)")
    common.add_argument("--config", type=Path, default=argparse.SUPPRESS,
                        help="configuration file (default: config.toml in the platform's config dir)")
    common.add_argument("--cluster-key-file", default=argparse.SUPPRESS,
                        help="file holding the cluster key (default: cluster.key in the data dir)")
    scripting = _Parser(add_help=False, parents=[common])
    scripting.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                           help="print one JSON document (shapes in docs/cli.md); errors too, on stderr")

    parser = _Parser(
        prog="frost-tui", parents=[common],
        description="Share idle CPU with your peers. Without a command: open the terminal UI.",
        epilog="Exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items()) + ".",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('frost-tui')}")
    node = parser.add_argument_group("running a node")
    node.add_argument("--headless", action="store_true", help="run the node without the UI (servers, tests, systemd)")
    node.add_argument("--name", help="name shown to peers")
    node.add_argument("--listen-host", help="address to listen on")
    node.add_argument("--port", type=int, help="UDP and TCP port (0 picks a free one)")
    node.add_argument("--advertise-host", help="address peers use to reach this node")
    node.add_argument("--broadcast-address", help="discovery broadcast address ('' turns broadcast off)")
    node.add_argument("--seed", action="append", metavar="HOST:PORT", help="peer to join through (repeatable)")
    node.add_argument("--log-level", choices=("debug", "info", "warning", "error"))
    ui = parser.add_argument_group("the terminal UI (attaches to the node running for this data dir, if any)")
    ui.add_argument("--attach", metavar="HOST[:PORT]",
                    help="show the node on another machine (it needs control.listen and its owner token)")
    ui.add_argument("--watch", action="store_true", help="attach read-only: the node refuses every command")

    verbs = parser.add_subparsers(dest="verb", metavar="COMMAND")

    def verb(name: str, help_text: str) -> argparse.ArgumentParser:
        return verbs.add_parser(name, parents=[scripting], help=help_text, description=help_text)

    verb("status", "this node's state and its guests")
    verb("peers", "the cluster's resource table")

    key = verb("key", "show or change the cluster key")
    key_verbs = key.add_subparsers(dest="key_verb", metavar="ACTION", required=True)
    key_verbs.add_parser("show", parents=[scripting], help="print this cluster's join code",
                         description="print this cluster's join code (it never creates a key)")
    key_set = key_verbs.add_parser("set", parents=[scripting], help="join another cluster with its join code",
                                   description="join another cluster with its join code: a running node leaves its "
                                               "cluster for it at once (refused while work of its cluster would be "
                                               "stranded); else the node joins it when it starts")
    key_set.add_argument("code")
    key_set.add_argument("--seed", dest="join_seed", metavar="HOST:PORT", default="",
                         help="a peer of that cluster to ask first where broadcasts do not reach it (kept as node.seeds)")
    key_verbs.add_parser("owner-token", parents=[scripting],
                         help="print this node's owner token (what `--attach` from another machine asks for)",
                         description="print this node's owner token (what `--attach` from another machine asks for)")
    key_remember = key_verbs.add_parser("remember", parents=[scripting],
                                        help="keep another machine's owner token for `--attach` and control.hosts",
                                        description="keep another machine's owner token (mode 0600) for "
                                                    "`--attach` and the control.hosts list")
    key_remember.add_argument("host", metavar="HOST[:PORT]")
    key_remember.add_argument("token")

    service = verb("service", "run the node as a systemd service, or stop doing so")
    service_verbs = service.add_subparsers(dest="service_verb", metavar="ACTION", required=True)
    for action, help_text in (("install", "write, enable and start the systemd unit"),
                              ("uninstall", "stop, disable and remove the systemd unit")):
        service_action = service_verbs.add_parser(action, parents=[scripting], help=help_text, description=help_text)
        where = service_action.add_mutually_exclusive_group()
        where.add_argument("--user", action="store_false", dest="system",
                           help="a user unit: runs while you are logged in, or always with linger (default)")
        where.add_argument("--system", action="store_true", dest="system", help="a system unit: runs from boot")

    plugins = verb("plugins", "list calculation plugins, show, add or remove one")
    plugin_verbs = plugins.add_subparsers(dest="plugin_verb", metavar="ACTION")
    plugin_show = plugin_verbs.add_parser("show", parents=[scripting], help="one plugin: what it does, its parameters",
                                          description="one plugin in full: what it computes, and each parameter "
                                                      "`submit --param` takes, with its type, default and range")
    plugin_show.add_argument("name")
    plugin_add = plugin_verbs.add_parser("add", parents=[scripting], help="add a plugin file or folder",
                                         description="add a plugin file or folder")
    plugin_add.add_argument("path", type=Path)
    plugin_remove = plugin_verbs.add_parser("remove", parents=[scripting], help="remove a plugin you added",
                                            description="forget a plugin added with `plugins add` (or the UI's l), "
                                                        "working or broken: a broken one then stops warning")
    plugin_remove.add_argument("name")

    submit = verb("submit", "submit an assignment")
    submit.add_argument("plugin")
    submit.add_argument("params", nargs="*", metavar="K=V", help="plugin parameters (`plugins show NAME` lists them)")
    submit.add_argument("--param", action="append", default=[], metavar="K=V", help="a plugin parameter (repeatable)")
    submit.add_argument("--wait", action="store_true", help="wait until the assignment finishes")
    submit.add_argument("-o", "--output", type=Path, metavar="PATH",
                        help="with --wait: save the result to this file, or into this folder under the plugin's name")
    submit.add_argument("--one-per-host", action="store_true",
                        help="at most one unit of this assignment per host (default: one per free core)")
    submit.add_argument("--input", action="append", default=[], metavar="NAME=PATH",
                        help="an input file the plugin opens by NAME; it stays on this machine (repeatable)")
    submit.add_argument("--verify", type=float, metavar="FRACTION",
                        help="re-run this fraction of units (chosen at random) on a second host and compare "
                             "results; 0 turns checking off (default: cluster.verify, 0.02)")
    submit.add_argument("--check-every", metavar="EVERY",
                        help="a gang: how often its members check for better hosts (10s, 2m, 50supersteps, "
                             "30s,50steps or off; add `forced` (2m,forced) to restart the gang on the best p at "
                             "every check; default: gang.check_interval and gang.check_supersteps)")

    verb("assignments", "my assignments, each with up to 200 of its units (`units` lists them all)")
    units = verb("units", "an assignment's units: every one, or those matching WORDS")
    units.add_argument("assignment")
    units.add_argument("words", nargs="*", metavar="WORD",
                       help="a unit's number, a state (running, queued, paused, failed), a host's name or words of "
                            "an error; every one must match")
    units.add_argument("--limit", type=int, default=None, metavar="N", help="list the first N that match (default: all)")
    stats = verb("stats", "CPU given to and received from each peer, per day, and the top contributors")
    stats.add_argument("--since", metavar="DURATION", help="only the last 90s, 30m, 24h, 7d, 2w… (default: all)")
    stats.add_argument("--csv", type=Path, metavar="FILE", help="also write the figures as CSV to FILE")
    stats.add_argument("--format", choices=("text", "csv"), default="text", help="print as text (default) or CSV")
    result = verb("result", "save an assignment's result")
    result.add_argument("assignment")
    result.add_argument("-o", "--output", type=Path, metavar="PATH",
                        help="the file to write, or a folder to write it into under the plugin's name (default: that "
                             "name in the current folder, never over a file already there)")
    result.add_argument("--files", type=Path, metavar="DIR", help="also save the units' output files into DIR")
    verb("cancel", "cancel an assignment").add_argument("assignment")
    verb("unquarantine", "send units again to a host quarantined for a wrong result").add_argument("node")

    pause = verb("pause", "stop every guest at once and take no new ones (stopped guests go on to other peers "
                          "after owner.pause_evict_after)")
    pause.add_argument("--until", metavar="HH:MM", help="resume by itself at this time")
    verb("resume", "let guests run again")
    verb("evict", "checkpoint guests and send them away").add_argument("task", nargs="?")
    move = verb("move", "move a running unit to another peer (a guest here, or a unit of an assignment of this node)")
    move.add_argument("task", help="the unit's task id, ASSIGNMENT.UNIT")
    move.add_argument("node", help="the destination: a peer's name, node id or node id prefix")
    verb("finish", "take nothing new and pause once the current guests finish")
    config = verb("config", "show every option, its value and its meaning; or set some")
    config_verbs = config.add_subparsers(dest="config_verb", metavar="ACTION")
    config_set = config_verbs.add_parser(
        "set", parents=[scripting], help="change options: the running node applies them at once",
        description="change options in the configuration file, keeping its comments; the running node of this data "
                    "dir applies them at once (those read only at start when it starts again), as the Settings tab "
                    "does. Values as the Settings tab takes them: 50, on/off, a, b for a list, {\"K\" = \"V\"} "
                    "for a table")
    config_set.add_argument("assignments", nargs="+", metavar="NAME=VALUE",
                            help="an option by its full name, as `frost-tui config` lists it: guests.cpus=2")
    verb("measure", "measure again what a guest gets here on an idle and on a busy machine")
    shots = verb("screenshots", "render a PNG (and SVG) of every screen into a folder (needs frost-tui[screenshots])")
    shots.add_argument("--out", type=Path, default=Path("screenshots"), help="folder (default: screenshots)")
    shots.add_argument("--live", action="store_true",
                       help="take them from a real cluster of four nodes started on loopback for ~1 minute "
                            "(default: a fixed demo state)")
    shots.add_argument("--dedicated", action="store_true",
                       help="with --live: this machine's node too runs as a dedicated server (owner policy always), "
                            "where other work keeps the default policy from lending the CPU")
    shots.add_argument("--history", type=float, default=HISTORY_SECONDS, metavar="SECONDS",
                       help=f"with --live: seconds of measurements in the charts before the ray trace starts, "
                            f"{MIN_HISTORY_SECONDS:g} to {MAX_HISTORY_SECONDS:g} (default: {HISTORY_SECONDS:g})")
    completion = verb("completion", "print the shell completion script: "
                                    "eval \"$(frost-tui completion bash)\", or see docs/cli.md")
    completion.add_argument("shell", choices=("bash", "zsh", "fish"))
    verbs.add_parser("simulate", help="compare load-balancing policies in a discrete-event simulation",
                     add_help=False)   # its options are the simulator's own (`simulate --help`)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["simulate"]:
        from frost_core import run_simulator as simulate  # the simulator parses its own options

        return simulate(argv[1:])
    as_json = "--json" in argv
    command = _command_name(argv)
    try:
        args = _parse(argv)
        if args.verb == "simulate":   # after options of this program, which it does not need (`--data-dir d simulate`)
            from frost_core import run_simulator

            return run_simulator(args.simulator_options)
        command = _command_of(args)
        code = _dispatch(args, _Output(as_json))
        sys.stdout.flush()  # a reader gone shows here, inside the try, not at exit as a traceback
        return code
    except FrostError as error:
        code = _exit_code(error)
        if as_json:
            print(json.dumps({"schema": JSON_SCHEMA_VERSION, "command": command, "ok": False, "exit_code": code,
                              "error": {"title": error.title, "message": error.message}}), file=sys.stderr)
        else:
            print(f"frost-tui: {error.title}: {error.message}", file=sys.stderr)
        return code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader (`head`) has all it wanted: say nothing more, and keep Python from
        # complaining when it flushes stdout on the way out.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_READER_GONE


def _command_name(argv: list[str]) -> str:
    """The command an argv names, for an error met before parsing succeeds ("" for the UI)."""
    words = [word for word in argv if not word.startswith("-")]
    for length in (2, 1):
        if " ".join(words[:length]) in RESULTS:
            return " ".join(words[:length])
    return ""


def _parse(argv: list[str]) -> argparse.Namespace:
    """The command line, with a submit's K=V parameters anywhere among its options (`submit mandelbrot width=640
    --wait height=480`): argparse takes a list of positionals in one piece only, and would refuse the second.
    After `simulate`, whatever follows is the simulator's (`simulator_options`)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.verb == "simulate":
        args.simulator_options = extra
    elif extra and args.verb == "submit" and not any(item.startswith("-") for item in extra):
        args.params.extend(extra)
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _command_of(args: argparse.Namespace) -> str:
    """"status", "key show", "plugins add"…: the key of RESULTS and the `command` of the JSON document."""
    nested = (getattr(args, name, None) for name in ("key_verb", "plugin_verb", "service_verb", "config_verb"))
    return " ".join(filter(None, (args.verb, *nested)))


def _exit_code(error: FrostError) -> int:
    if isinstance(error, NodeUnavailableError):
        return EXIT_NO_NODE
    return EXIT_USAGE if isinstance(error, ConfigError) else EXIT_REFUSED


def _dispatch(args: argparse.Namespace, out: _Output) -> int:
    paths = _paths(args)
    if args.verb is None:
        config = load_config(paths, _node_overrides(args))
        if args.headless:
            from frost_core import run_headless

            return run_headless(config)
        from frost_tui.app import run_app
        from frost_tui.targets import choose_targets

        return run_app(config, targets=choose_targets(config, attach=args.attach, watch=args.watch), watch=args.watch)
    result, code = _COMMANDS[args.verb](args, paths, out)
    if out.json:
        print(json.dumps({"schema": JSON_SCHEMA_VERSION, "command": _command_of(args), "ok": code == EXIT_OK,
                          "result": _plain(result)}, indent=2))
    return code


def _plain(value: Any) -> Any:
    """A result as JSON data: dataclasses as objects, tuples as arrays, enums as their values."""
    if dataclasses.is_dataclass(value):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value.value if isinstance(value, enum.Enum) else value


def _paths(args: argparse.Namespace) -> Paths:
    config_file = getattr(args, "config", None)
    if config_file is not None and not config_file.is_file():
        raise ConfigError(f"--config {config_file}: no such file" if not config_file.exists()
                          else f"--config {config_file}: not a file")
    return Paths.resolve(config_file=config_file, data_dir=getattr(args, "data_dir", None))


def _node_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for flag, option in _NODE_FLAGS.items():
        value = getattr(args, flag, None)
        if value is not None:
            overrides[option] = value
    for seed in overrides.get("node.seeds", []):
        parse_address(seed, option="--seed")
    return overrides


def _call(paths: Paths, request: Any) -> Any:
    from frost_core import call_node

    return call_node(paths, request)


def _key(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[KeyResult | str, int]:
    """`key show` reads the key and never makes one: a typo in --data-dir must not start a new cluster."""
    from frost_core import ClusterKey

    config = load_config(paths, _node_overrides(args))
    key_file = config.cluster_key_file
    if args.key_verb == "remember":
        from frost_core import remember_owner_token
        from frost_tui.targets import attach_address

        address = attach_address(args.host)
        path = remember_owner_token(paths.data_dir, address, ClusterKey.from_join_code(args.token.strip()))
        out.say(f"Saved the owner token of {address[0]}:{address[1]} to {path}.")
        return KeyResult(key_file=str(path)), EXIT_OK
    if args.key_verb == "owner-token":
        from frost_core import load_owner_token

        token = load_owner_token(paths.data_dir).to_join_code()
        out.say(token)
        return token, EXIT_OK
    if args.key_verb == "show":
        if not key_file.exists():
            if not paths.data_dir.is_dir() and getattr(args, "data_dir", None) is not None:
                raise ConfigError(f"--data-dir {paths.data_dir}: no such directory")
            raise ConfigError(f"no cluster key at {key_file} yet: a node makes one when it first starts, "
                              "or join a cluster with `frost-tui key set CODE`")
        code = ClusterKey.load(key_file).to_join_code()
        out.say(code)
        return KeyResult(key_file=str(key_file), join_code=code), EXIT_OK
    from frost_core import JoinCluster, save_config

    key = ClusterKey.from_join_code(args.code.strip())   # a mistyped code or seed is refused before anything changes
    if args.join_seed:
        parse_address(args.join_seed, option="--seed")
    try:
        said = _call(paths, JoinCluster(code=key.to_join_code(), seed=args.join_seed))
    except NodeUnavailableError:
        key.save(key_file)
        if args.join_seed:
            seeds = [args.join_seed]
            save_config(load_config(paths).replace(node__seeds=seeds), names={"node.seeds": seeds})
        out.say(f"Saved the cluster key to {key_file}; the node joins that cluster when it starts.")
    else:
        out.say(f"The node {said}.")
    return KeyResult(key_file=str(key_file)), EXIT_OK


def _service(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[tuple[str, ...], int]:
    from frost_tui import service

    config = load_config(paths)
    executable = str(Path(sys.argv[0]).resolve())
    reason = service.systemd_missing_reason()
    if reason is not None:
        raise FrostError(service.without_systemd(reason, config, executable=executable), title="No systemd here")
    scope = service.Scope(system=args.system)
    if args.service_verb == "install":
        lines = service.install(config, scope, executable=executable)
    else:
        lines = service.uninstall(scope)
    out.say("\n".join(lines))
    return tuple(lines), EXIT_OK


def _config(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[ConfigResult | SetResult, int]:
    return _set_config(args, paths, out) if args.config_verb == "set" else _show_config(paths, out)


def _set_config(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[SetResult, int]:
    """Through the running node when there is one, which validates, saves and applies, as the Settings tab's save
    does; else into the file directly. Every value is checked before anything is written."""
    from frost_core import SaveSettings, save_config, waiting_for_restart

    values = _option_values(args.assignments)
    config = load_config(paths).replace(**{name.replace(".", "__"): value for name, value in values.items()})
    try:
        _call(paths, SaveSettings(values=values))
        applied = True
    except NodeUnavailableError:
        save_config(config, names=values)
        applied = False
    later = waiting_for_restart(values)
    out.say(f"Saved {', '.join(f'{name} = {value!r}' for name, value in values.items())} to {paths.config_file}.")
    if not applied:
        out.say("No node runs with this data dir: they take effect when one starts.")
    elif not later:
        out.say("The running node applies them now.")
    elif all(waiting_for_restart([name]) for name in values):
        out.say(f"The running node goes on as it was until then: {later}.")
    else:
        out.say(f"The running node applies the others now; {later}.")
    return SetResult(config_file=str(paths.config_file), values=values, applied=applied,
                     waiting_for_restart=later), EXIT_OK


def _option_values(assignments: list[str]) -> dict[str, Any]:
    """`NAME=VALUE` words as typed values, or ConfigError naming the word and what it takes."""
    from frost_core import option_named
    from frost_tui.option_text import parse_value

    values: dict[str, Any] = {}
    for word in assignments:
        name, sep, text = word.partition("=")
        if not sep:
            raise ConfigError(f"{word!r} is not NAME=VALUE (guests.cpus=2)")
        try:
            values[name.strip()] = parse_value(option_named(name.strip()), text)
        except ValueError as error:
            raise ConfigError(str(error)) from None
    return values


def _show_config(paths: Paths, out: _Output) -> tuple[ConfigResult, int]:
    config = load_config(paths)
    exists = paths.config_file.exists()
    out.say(f"# configuration file: {paths.config_file}{'' if exists else ' (not created yet)'}\n"
            f"# data dir: {paths.data_dir}\n# log dir: {paths.log_dir}\n")
    out.say("\n".join(f"{option.name} = {config.get(option.name)!r}" for option in OPTIONS) + "\n")
    out.say(describe_options())
    return ConfigResult(config_file=str(paths.config_file), config_file_exists=exists, data_dir=str(paths.data_dir),
                        log_dir=str(paths.log_dir), values=dict(config.values)), EXIT_OK


def _measure(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[Measurement, int]:
    """The running node measures (and uses the figures at once); with none running, this process does."""
    from dataclasses import asdict

    from frost_core import Remeasure, load_or_measure

    try:
        figures = _call(paths, Remeasure())
        where = "the running node uses them from now on"
    except NodeUnavailableError:
        figures = Measurement(**asdict(load_or_measure(paths.extremities_file, remeasure=True)))
        where = "no node is running here; it uses them from its next start"
    out.say(f"speed {figures.speed:.3f} per CPU, {counted(figures.cpus, 'CPU')}\n"
            f"idle machine: guests get {figures.idle:.3f} speed units\n"
            f"busy machine: guests get {figures.heavy:.3f} speed units\n"
            f"saved to {paths.extremities_file}; {where}")
    return figures, EXIT_OK


def _screenshots(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[tuple[str, ...], int]:
    if not MIN_HISTORY_SECONDS <= args.history <= MAX_HISTORY_SECONDS:
        raise ConfigError(f"--history {args.history:g}: the charts' seconds before the ray trace must be from "
                          f"{MIN_HISTORY_SECONDS:g} to {MAX_HISTORY_SECONDS:g}")
    try:
        import cairosvg  # noqa: F401 - checked before any screen is rendered, not after the first one
    except (ImportError, OSError) as error:  # cairosvg, or the cairo library it loads, is missing
        raise ConfigError(f"`frost-tui screenshots` needs the screenshots extra ({error}): "
                          "pip install 'frost-tui[screenshots]' (and the cairo library, e.g. apt install libcairo2)",
                          title="Screenshots not installed") from error
    saved = tuple(str(path) for path in render_screenshots(args.out, live=args.live, dedicated=args.dedicated,
                                                           history=args.history))
    out.say("\n".join(saved))
    return saved, EXIT_OK


def _completion(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[str, int]:
    """Made from the parser at run time: a pip install has no directory the shells read completions from."""
    import shtab

    script = shtab.complete(build_parser(), shell=args.shell)
    out.say(script)
    return script, EXIT_OK


def _table_query(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[Any, int]:
    from frost_core import GetStatus, ListAssignments, ListPeers, plain_reply

    request, table = {"status": (GetStatus(), tables.status), "peers": (ListPeers(), tables.peers),
                      "assignments": (ListAssignments(), tables.assignments)}[args.verb]
    reply = _call(paths, request)
    if not out.json:
        out.say(table(plain_reply(request, reply)))
    return reply, EXIT_OK


def _stats(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[LedgerView, int]:
    from frost_core import GetLedger

    from frost_tui import stats

    since = stats.since_of(args.since, time.time())   # a bad --since fails before the node is asked
    view = _call(paths, GetLedger(since=since))
    if args.csv:
        args.csv.write_text(stats.as_csv(view), encoding="utf-8")
    out.say(stats.as_csv(view).rstrip("\n") if args.format == "csv" else stats.as_text(view))
    if args.csv:
        out.say(f"Saved the figures as CSV to {args.csv}", file=sys.stderr if args.format == "csv" else None)
    return view, EXIT_OK


def _result(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[SavedResult, int]:
    from frost_core import FetchResult, GetAssignment

    output = _result_file(args.output, lambda: _call(paths, GetAssignment(assignment_id=args.assignment)))
    saved = _call(paths, FetchResult(assignment_id=args.assignment, output=str(output),
                                     files=str(args.files.resolve()) if args.files else None))
    _say_saved(saved, out, args.assignment)
    if args.files:
        out.say(f"Saved {counted(len(saved.files), 'output file')} to {saved.files_folder}")
    return saved, EXIT_OK


def _result_file(output: Path | None, assignment: Callable[[], AssignmentView]) -> Path:
    """Where `result` and `submit --wait --output` write: `--output`, or under the plugin's file name inside it
    when it is a folder. Without it, that name in the current folder, as the UI's `w` offers; a file already there is
    refused rather than replaced, since it is most likely the result of an earlier assignment of the plugin.
    `assignment()` is asked only then."""
    if output is not None and not output.is_dir():
        return output.resolve()
    view = assignment()
    target = ((output or Path.cwd()) / (view.result_filename or view.id)).resolve()
    if output is None and view.state == "done" and target.exists():
        raise FrostError(f"{target} is there already (an earlier result?): name the file to write with --output",
                         title="Not overwritten")
    return target


def _say_saved(saved: SavedResult, out: _Output, assignment_id: str) -> None:
    """Where the result went; and, when the name asked for promises another format than the plugin's (x.ppm for
    a PNG), that the file holds the plugin's bytes as they are: nothing here converts images."""
    out.say(f"Saved {saved.bytes} bytes ({saved.media_type}) to {saved.path}")
    if saved.kept_files:
        shown = ", ".join(saved.kept_files[:3]) + (", …" if len(saved.kept_files) > 3 else "")
        out.say(f"Its units made {counted(len(saved.kept_files), 'output file')} ({shown}), kept in "
                f"{saved.kept_folder}: `frost-tui result {assignment_id} --files DIR` saves a copy")
    made, asked = Path(saved.named).suffix, Path(saved.path).suffix
    if made and made.lower() != asked.lower():
        out.say(f"Note: the plugin's result is {saved.media_type} ({saved.named}); {Path(saved.path).name} holds "
                f"those bytes unchanged, so name it {made} to open it as what it is", file=sys.stderr)


def _units(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[FoundUnits, int]:
    from frost_core import FindUnits, plain_reply

    if args.limit is not None and args.limit < 0:
        raise ConfigError(f"--limit wants a count of units, not {args.limit}")
    words = " ".join(args.words)
    query = FindUnits(assignment_id=args.assignment, match=words, limit=args.limit)
    found = _call(paths, query)
    if not out.json:
        out.say(tables.units(plain_reply(query, found), words))
    return found, EXIT_OK


def _owner_command(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[str, int]:
    from frost_core import (
        CancelAssignment, ClearQuarantine, EvictGuests, FinishThenPause, MoveTask, PauseHosting, ResumeHosting,
        parse_until,
    )

    match args.verb:
        case "cancel":
            command = CancelAssignment(assignment_id=args.assignment)
        case "pause":
            command = PauseHosting(until=parse_until(args.until, now=time.time()) if args.until else None)
        case "resume":
            command = ResumeHosting()
        case "finish":
            command = FinishThenPause()
        case "evict":
            command = EvictGuests(task_id=args.task)
        case "unquarantine":
            command = ClearQuarantine(node=args.node)
        case _:
            command = MoveTask(task_id=args.task, node=args.node)
    reply = _call(paths, command)
    out.say(f"Cancelled {reply}." if args.verb == "cancel" else reply)
    return reply, EXIT_OK


def _plugins(args: argparse.Namespace, paths: Paths,
             out: _Output) -> tuple[tuple[PluginView, ...] | PluginView | str, int]:
    """Through the running node when there is one (it then knows at once), else on the data dir directly."""
    from frost_core import AddPlugin, ListPlugins, PluginRegistry, RemovePlugin, plain_reply, plugin_views

    if args.plugin_verb == "remove":
        try:
            reply = _call(paths, RemovePlugin(name=args.name))
        except NodeUnavailableError:
            PluginRegistry(paths.data_dir).remove(args.name)
            reply = f"removed {args.name}"
        out.say(f"{reply[0].upper()}{reply[1:]}.")
        return reply, EXIT_OK
    adding = args.plugin_verb == "add"
    try:
        views = (_call(paths, AddPlugin(path=str(args.path.resolve()))),) if adding else _call(paths, ListPlugins())
    except NodeUnavailableError:
        registry = PluginRegistry(paths.data_dir)
        views = plugin_views([registry.add(args.path.resolve())] if adding else registry.scan())
    if args.plugin_verb == "show":
        view = _named_plugin(views, args.name)
        out.say(tables.plugin_in_full(plain_reply(ListPlugins(), (view,))[0]))
        return view, EXIT_OK if view.ok else EXIT_REFUSED
    if not out.json:
        out.say(tables.plugins(plain_reply(ListPlugins(), views)))
    return views, EXIT_OK if all(view.ok for view in views) or not adding else EXIT_REFUSED


def _named_plugin(views: tuple[PluginView, ...], name: str) -> PluginView:
    """The plugin `submit NAME` would run (the working one no other copy supersedes; else a broken one, which says
    why), or PluginError listing the names."""
    named = sorted((view for view in views if view.name == name),
                   key=lambda view: (not view.ok, bool(view.superseded_by)))
    if not named:
        raise PluginError(f"no plugin named {name!r} (plugins here: {', '.join(sorted({v.name for v in views}))})",
                          title="No such plugin")
    return named[0]


def _submit(args: argparse.Namespace, paths: Paths, out: _Output) -> tuple[SubmitResult, int]:
    from frost_core import FetchResult, GetAssignment, SubmitAssignment

    params = {}
    for item in (*args.params, *args.param):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"a plugin parameter is K=V (as in `submit {args.plugin} units=8`), not {item!r}")
        params[key] = value
    if args.output and not args.wait:
        raise ConfigError("--output needs --wait (or use `frost-tui result ID --output PATH` later)")
    seconds, supersteps, forced = (None, None, False) if args.check_every is None \
        else parse_check_every(args.check_every)
    submitted: Submitted = _call(paths, SubmitAssignment(
        plugin=args.plugin, params=params, one_per_host=args.one_per_host, inputs=_input_files(args.input),
        verify=args.verify, check_interval=seconds, check_supersteps=supersteps,
        check_forced=forced))
    made = f"a gang of {counted(submitted.units, 'member')}" if submitted.gang else counted(submitted.units, 'unit')
    out.say(f"Submitted {submitted.id}: {made} of {args.plugin}.")
    if not args.wait:
        return SubmitResult(id=submitted.id, units=submitted.units), EXIT_OK
    while _call(paths, GetAssignment(assignment_id=submitted.id, every_unit=False)).state not in (
            "done", "failed", "cancelled"):
        time.sleep(0.5)
    state = _call(paths, GetAssignment(assignment_id=submitted.id))   # every unit, once
    ended = SubmitResult(id=submitted.id, units=submitted.units, assignment=state)
    if state.state != "done":
        out.say(f"Assignment {submitted.id} {state.state}: {state.error or ''}", file=sys.stderr)
        return ended, EXIT_REFUSED
    if not args.output:
        out.say(f"Assignment {submitted.id} is done.")
        return ended, EXIT_OK
    output = _result_file(args.output, lambda: state)   # (the assignment just read)
    saved = _call(paths, FetchResult(assignment_id=submitted.id, output=str(output)))
    _say_saved(saved, out, submitted.id)
    return SubmitResult(id=submitted.id, units=submitted.units, assignment=state, saved=saved), EXIT_OK


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


_COMMANDS = {
    "status": _table_query, "peers": _table_query, "assignments": _table_query, "units": _units, "key": _key,
    "stats": _stats,
    "service": _service, "config": _config, "measure": _measure, "screenshots": _screenshots, "completion": _completion,
    "plugins": _plugins, "submit": _submit, "result": _result, "cancel": _owner_command, "pause": _owner_command,
    "resume": _owner_command, "finish": _owner_command, "evict": _owner_command, "move": _owner_command,
    "unquarantine": _owner_command,
}
"""Each command's handler: it prints its text as it goes and returns (result, exit code)."""


if __name__ == "__main__":
    sys.exit(main())
