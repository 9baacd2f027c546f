"""The owner's configuration: a TOML file validated into frozen settings, every option documented.

Each option is declared once, with its type, default, bounds and documentation; the loader,
the error messages, `frost-tui config` and docs/configuration.md all read that one table, so
an option cannot exist without its documentation.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import hashlib
import os
import socket
import tempfile
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs
import tomlkit

from frost_core.api.errors import ConfigError, StorageError
from frost_core.policies.desk import parse_schedule
from frost_core.wire.hosts import is_host

APP_NAME = "frost-tui"
DEFAULT_PORT = 47631


@dataclass(frozen=True)
class Option:
    """One configuration key: where it lives, what it accepts, and what it means."""

    section: str
    key: str
    kind: type
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    items: type = str           # what a dict option maps its string keys to

    @property
    def name(self) -> str:
        return f"{self.section}.{self.key}"


OPTIONS: tuple[Option, ...] = (
    # [node]
    Option("node", "name", str, "", "Name shown to peers; empty means this machine's host name."),
    Option("node", "listen_host", str, "0.0.0.0", "Address the node listens on (UDP and TCP)."),
    Option("node", "port", int, DEFAULT_PORT, "UDP and TCP port; 0 picks a free one.", 0, 65535),
    Option(
        "node", "advertise_host", str, "",
        "Address peers should use to reach this node, an IP address or a host name; empty means the "
        "address of the interface that routes to the broadcast address (or 127.0.0.1 for a loopback broadcast).",
    ),
    Option(
        "node", "broadcast_address", str, "255.255.255.255",
        "Where discovery announcements go; an empty string turns broadcast discovery off.",
    ),
    Option("node", "seeds", list, [], "Peers to join through, as \"HOST:PORT\" strings, for networks "
           "that broadcast does not reach. Any one live peer is enough to learn the whole cluster."),
    Option("node", "stop_handoff", float, 20.0,
           "Seconds a stopping node (SIGTERM, e.g. systemctl stop or a reboot; a UI's embedded node when its "
           "terminal closes) spends handing its guests to peers; what has not left by then stays checkpointed here.",
           0, 600),
    # [cluster]
    Option("cluster", "key_file", str, "", "File holding the cluster key; empty means cluster.key in the data dir."),
    Option("cluster", "allow_cluster_plugins", bool, True,
           "Run plugins whose code arrives from a master in this (keyed) cluster."),
    Option("cluster", "report_interval", float, 2.0,
           "Seconds between a host's reports to each master of the units it runs for it (also their heartbeat).",
           0.1, 600),
    Option("cluster", "host_timeout", float, 30.0,
           "Seconds a master waits without a report of a unit before restarting it elsewhere from its last "
           "replicated checkpoint.", 1, 86400),
    Option("cluster", "unit_lease", float, 300.0,
           "Seconds a master that lost every peer at once keeps its units' places on them: it is then the "
           "likely one cut off (Wi-Fi, a closed lid, a VPN reconnecting) and its hosts keep computing. A few "
           "minutes covers those; past it, the master re-places the units it can.", 1, 86400),
    Option("cluster", "fair_share", bool, True,
           "Share the cluster by recent use: a master places, and a host takes, the units of the submitter "
           "(user@node) who used the least guest CPU lately first (HTCondor's user priority). Off: no memory, "
           "the submitters waiting now share it equally (fewest units running first). Running guests are never "
           "stopped for it."),
    Option("cluster", "usage_half_life", float, 86400.0,
           "Seconds after which a submitter's past guest CPU time counts half in fair share: a day by default, "
           "so yesterday's heavy user competes almost as a newcomer.", 60, 30 * 86400),
    Option("cluster", "share_weights", dict, {},
           "Fair-share weights per submitter (\"user@NODE_ID\" = 2.0 gets twice the share of weight 1); "
           "submitters not named weigh 1.", items=float),
    Option("cluster", "verify", float, 0.02,
           "Fraction of each assignment's units, chosen at random, that a second host runs again to check its "
           "result (a third settles a mismatch; the host outvoted is quarantined). `submit --verify` overrides it "
           "per assignment.", 0, 1),
    Option("cluster", "balance_interval", float, 10.0,
           "Seconds between rounds of the load balancer (send a guest away, or ask a loaded peer for one); "
           "0 turns it off.", 0, 3600),
    Option("cluster", "balance_band", float, 0.25,
           "Width of the balancer's dead band: a node sends guests away below average x (1 - band) and asks for "
           "work above average x (1 + band) (FROST 5.2.1).", 0, 1),
    Option("cluster", "min_stay", float, 300.0,
           "Seconds a guest that arrived by a move stays before the balancer moves it again (unless its new "
           "host's owner returns).", 0, 86400),
    Option("cluster", "min_gain", float, 0.0,
           "Seconds a move must save, over and above its cost, for the balancer to make it.", 0, 86400),
    Option("cluster", "default_bandwidth", float, 10e6,
           "Bytes per second assumed towards a peer before any transfer to it has been measured.", 1e3, 1e11),
    Option("cluster", "broadcast_change", float, 0.05,
           "Relative change of this node's offer that is worth gossiping a new figure for (FROST 9.1).", 0, 1),
    Option("cluster", "destination_candidates", int, 8,
           "Destinations the balancer ranks for a guest; only these are queried afresh before a move.", 1, 100),
    Option("cluster", "hold_results", float, 7 * 86400.0,
           "Seconds a host keeps finished results for a master it cannot reach before giving up on them: a week, "
           "as a submitter's laptop may stay shut over a long weekend.", 60, 30 * 86400),
    Option("cluster", "reciprocity", bool, False,
           "Fair share credits a submitter with what its node gave the cluster beyond what it took (from the "
           "signed ledger summaries): those who give are served before those who only take."),
    # [gossip]
    Option("gossip", "interval", float, 2.0, "Seconds between push-pull exchanges of the resource table.", 0.05, 60),
    Option("gossip", "fanout", int, 2, "Random peers contacted each gossip interval, and by an immediate push (k).",
           1, 16),
    Option("gossip", "probe_interval", float, 0.25,
           "Seconds between failure-detection probes; must exceed probe_timeout.", 0.05, 60),
    Option("gossip", "probe_timeout", float, 0.1, "Seconds to wait for a probe's direct answer.", 0.01, 30),
    Option("gossip", "suspicion_multiplier", float, 20.0,
           "A confirmed suspicion lasts this many probe intervals times log10(cluster size) before the "
           "peer counts as dead.", 1, 1000),
    Option("gossip", "suspicion_min", float, 10.0,
           "Shortest suspicion, in seconds: long enough for a node whose loop stalled to wake up and refute.",
           0.1, 3600),
    Option("gossip", "announce_interval", float, 30.0, "Seconds between discovery broadcasts.", 1, 3600),
    # [guests]
    Option("guests", "cpus", int, 0, "CPUs guests may use; 0 means all of them.", 0, 4096),
    Option("guests", "memory_pool_mb", int, 0,
           "Memory guests may hold together (the sizes their units declare), in MiB; 0 means half of this "
           "machine's memory. Saved smaller while guests run, it sends those beyond it away.", 0, 1 << 30),
    Option("guests", "memory_pool_in_use_mb", int, 0,
           "Memory guests may hold together while you are at the desk (keyboard or mouse input within "
           "owner.input_idle seconds; where the OS cannot tell, always), in MiB: when you come back, the guests "
           "beyond it are checkpointed and sent to peers (or wait in their master's queue), and none that does not "
           "fit is taken until you leave. 0: one pool, at the desk or not.", 0, 1 << 30),
    Option("guests", "min_free_disk_mb", int, 256,
           "Free space, in MiB, left on the disk of the data folder: below it no new guest is taken (their "
           "checkpoints and results would have nowhere to go); the guests running go on. 0: no floor.",
           0, 1 << 30),
    Option("guests", "max_retries", int, 3, "Times a failed unit is retried before its assignment fails.", 0, 100),
    Option("guests", "step_timeout", float, 120.0,
           "Seconds one plugin step may take before the guest counts as stuck.", 1, 86400),
    Option("guests", "warm_spare", bool, True,
           "Keep a guest process started and waiting at the lowest priority for each guest CPU, up to 4 (no "
           "CPU, ~15 MiB each), so the units an assignment starts at once skip the interpreter's start-up "
           "(~0.1 s); and one plugin worker (~15 MiB more) for the next split or combine of an assignment."),
    Option("guests", "units_per_process", int, 1000,
           "Units of one assignment a guest process runs in turn (its plugin imported once; module globals "
           "survive between them) before a fresh process takes over; 1 gives every unit its own process.",
           1, 100_000),
    Option("guests", "isolation", str, "best-effort",
           "\"strict\" refuses to start a guest when any isolation layer (cgroups, Landlock, network namespace, "
           "unprivileged user) is missing here; \"best-effort\" runs it with what the machine offers and shows a "
           "warning.", choices=("best-effort", "strict")),
    Option("guests", "cpu_cap_percent", float, 0.0,
           "CPU all guests together may use, in percent of one core, enforced by the guests' cgroup "
           "(cpu.max / cpu.cfs_quota_us); 0 means no cap.", 0, 409600),
    Option("guests", "cpu_cap_in_use_percent", float, 0.0,
           "The same cap while you are at the desk (keyboard or mouse input within owner.input_idle seconds; where "
           "the OS cannot tell, always), so guests stay quiet and cool while you work and take more when you "
           "leave; the tighter of the two caps holds. 0: one cap, at the desk or not.", 0, 409600),
    Option("guests", "max_processes", int, 64,
           "Processes and threads one guest may have at once (its cgroup's pids.max).", 4, 65536),
    # [checkpoints]
    Option("checkpoints", "min_interval", float, 30.0, "Shortest time between periodic checkpoints, seconds.", 1, 86400),
    Option("checkpoints", "max_interval", float, 900.0, "Longest time between periodic checkpoints, seconds.", 1, 86400),
    Option("checkpoints", "owner_interruptions_per_hour", float, 2.0,
           "Expected owner interruptions per hour: the λ of Young's interval sqrt(2C/λ).", 0.01, 3600),
    Option("checkpoints", "replicate_every", int, 1,
           "Send every Nth checkpoint of a guest to its assignment's master (0: never); a desk disk is not "
           "stable storage.", 0, 1000),
    Option("checkpoints", "replica_peers", int, 0,
           "Peers besides the master that also keep copies of a unit's replicated checkpoints (k).", 0, 8),
    Option("checkpoints", "replicate_max_mb", int, 256,
           "Largest checkpoint, in MiB, replicated to the master; bigger ones stay on this host only.", 0, 1 << 20),
    # [gang]
    Option("gang", "check_interval", float, 120.0,
           "Seconds between a gang's checks for a better set of hosts (BSPlib's predicate, OR-reduced at a "
           "barrier); a member's host whose owner holds its guests is left at the next check, the gang starting "
           "again from its last global checkpoint. 0: no timed checks. `submit --check-every` overrides it per "
           "gang.", 0, 86400),
    Option("gang", "check_supersteps", int, 0,
           "Supersteps between a gang's checks, besides check_interval (whichever comes first); 0: off.",
           0, 1_000_000),
    Option("gang", "checkpoint_interval", float, 600.0,
           "Seconds between a gang's global checkpoints when it does not move (taken at a barrier, kept by its "
           "master; the gang stays where it is): about the most work a kill of a member's host or of the master "
           "loses. 0: only when it moves.", 0, 86400),
    # [owner]
    Option("owner", "policy", str, "share",
           "What this desk lends: share (guests run at the lowest priority while you work, are suspended when your "
           "programs contend for the CPU and leave if that lasts), idle-only (guests run only after input_idle "
           "seconds without input and on a quiet CPU) or always (a dedicated server: only memory pressure and the "
           "desk rules stop guests).", choices=("share", "idle-only", "always")),
    Option("owner", "busy_cpu_percent", float, 70.0,
           "CPU use by your programs, in percent of ALL cores averaged over cpu_window seconds, that counts as "
           "contention. This node's own processes, its control-socket clients and programs at nice 19 or "
           "SCHED_IDLE are not counted.", 1, 100),
    Option("owner", "cpu_window", float, 2.0,
           "Seconds the owner's CPU use is averaged over before it is judged: a program starting is not contention.",
           1, 600),
    Option("owner", "count_idle_priority", bool, False,
           "Count programs at nice 19 or SCHED_IDLE (other nodes' guests, BOINC, Folding@home) as your own use."),
    Option("owner", "input_idle", float, 60.0,
           "Seconds since the last keyboard or mouse input below which you count as at the desk (where the OS "
           "tells): idle-only runs guests only past it, and guests.cpu_cap_in_use_percent and "
           "guests.memory_pool_in_use_mb hold below it.", 0, 86400),
    Option("owner", "memory_pressure", float, 10.0,
           "Memory pressure (PSI memory some avg10, percent of time tasks stalled on memory) that evicts the guests "
           "at once: a stopped guest keeps its memory.", 1, 100),
    Option("owner", "evict_after", float, 120.0,
           "Seconds of contention before suspended guests are migrated away.", 0, 86400),
    Option("owner", "resume_after", float, 30.0, "Quiet seconds before suspended guests resume.", 0, 86400),
    Option("owner", "evict_hold", float, 300.0,
           "Seconds after an eviction by the owner policy during which this machine takes no new guests "
           "(your own evict keypress only keeps the evicted units from coming straight back).", 0, 86400),
    Option("owner", "pause_evict_after", float, 600.0,
           "Seconds your pause (p, or `frost-tui pause`) holds the guests stopped before they checkpoint and leave "
           "for other peers, so that a long pause does not keep other people's units from their assignments "
           "(HTCondor's MaxSuspendTime); a timed pause that ends first keeps them. 0 turns it off: they wait "
           "for your resume.", 0, 7 * 86400),
    # [desk]
    Option("desk", "on_battery", bool, True,
           "Suspend guests while this machine runs on its battery; a machine without a battery never suspends "
           "for it."),
    Option("desk", "max_temperature", float, 90.0,
           "Suspend guests while any temperature sensor reads this many degrees Celsius or more, until the "
           "hottest is 10 degrees below it; 0 turns the rule off. `status` says when this machine has no sensors.",
           0, 150),
    Option("desk", "programs", list, [],
           "Process or executable names that suspend guests while any of them runs (games, video calls: "
           "[\"steam\", \"zoom\"]); checked every second."),
    Option("desk", "schedule", dict, {},
           "Recurring windows that pick the owner policy in force, as a table of \"DAYS HH:MM-HH:MM\" = "
           "\"POLICY\" (`{\"Mon-Fri 09:00-17:00\" = \"idle-only\", \"22:00-07:00\" = \"always\"}`): days "
           "like Mon-Fri or Sat,Sun, none for every day; a window past midnight ends the next morning; the "
           "first window that covers the local time wins; outside all of them `owner.policy` holds. "
           "Policies: `share`, `idle-only`, `always`."),
    # [control]
    Option("control", "listen", str, "",
           "HOST:PORT where UIs on other machines may attach (`frost-tui --attach`), on a channel keyed by "
           "this node's owner token (`frost-tui key owner-token`); empty: this machine's UIs only."),
    Option("control", "hosts", list, [],
           "Nodes on other machines, as \"HOST:PORT\" strings, that the UI switches between with `h` "
           "(each needs its owner token once: `frost-tui key remember HOST:PORT TOKEN`)."),
    # [log]
    Option("log", "level", str, "info", "Log level of the rotating log file.",
           choices=("debug", "info", "warning", "error")),
)

_BY_NAME = {option.name: option for option in OPTIONS}
SECTIONS = tuple(dict.fromkeys(option.section for option in OPTIONS))
READ_AT_START = {
    **{o.name: "the node" for o in OPTIONS if o.section in ("node", "gossip") and o.name != "node.stop_handoff"},
    "cluster.key_file": "the node", "control.listen": "the node", "log.level": "the node", "control.hosts": "the UI",
}
"""Options read only as the node (its sockets, membership, log) or the UI starts: a saved change waits for a
restart. The running node applies every other option as it is saved (the Settings tab, `config set`)."""


def option_named(name: str) -> Option:
    """The option of that full name ("guests.cpus"), or ConfigError naming it and the closest real one."""
    if name not in _BY_NAME:
        raise ConfigError(f"unknown option {name!r}{_suggest(name, _BY_NAME)}; `frost-tui config` lists them all")
    return _BY_NAME[name]


def waiting_for_restart(names: Collection[str]) -> str:
    """What a save of `names` leaves for a restart, as a clause ("node.port takes effect when the node starts
    again"); "" when the running node applies them all now."""
    waiting: dict[str, list[str]] = {}
    for name in names:
        if name in READ_AT_START:
            waiting.setdefault(READ_AT_START[name], []).append(name)
    return "; ".join(f"{' and '.join(sorted(named))} {'takes' if len(named) == 1 else 'take'} effect when {part} "
                     "starts again" for part, named in sorted(waiting.items(), key=lambda item: item[0] != "the node"))


@dataclass(frozen=True)
class Paths:
    """Where this node keeps its configuration, its state and its logs."""

    config_file: Path
    data_dir: Path
    log_dir: Path

    @classmethod
    def resolve(cls, *, config_file: Path | None = None, data_dir: Path | None = None) -> Paths:
        """Use the platform's directories unless the command line names others.

        A node started with --data-dir keeps its logs inside that directory, so several
        nodes on one machine never share (and rotate) one log file.
        """
        if config_file is None:
            config_file = Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"
        if data_dir is None:
            data_dir = Path(platformdirs.user_data_dir(APP_NAME))
            log_dir = Path(platformdirs.user_log_dir(APP_NAME))
        else:
            data_dir = data_dir.absolute()  # guests start in folders inside it, from another working directory
            log_dir = data_dir / "logs"
        return cls(config_file=config_file.absolute(), data_dir=data_dir, log_dir=log_dir)

    @property
    def control_socket(self) -> Path:
        """Where this node listens for the CLI and attached UIs.

        In `$XDG_RUNTIME_DIR/frost-tui/` (per user, mode 0700, cleared at logout, and short: a Unix
        socket path holds at most 107 bytes, which a deep --data-dir exceeds), named for the data
        dir so several nodes on one machine never meet; without a runtime dir, in the data dir.
        """
        runtime = os.environ.get("XDG_RUNTIME_DIR", "")
        if runtime and Path(runtime).is_dir():
            digest = hashlib.sha256(os.fsencode(self.data_dir.resolve())).hexdigest()[:16]
            return Path(runtime) / APP_NAME / f"{digest}.sock"
        return self.data_dir_control_socket

    @property
    def data_dir_control_socket(self) -> Path:
        """The socket of a node that had no runtime dir (a system service); clients look here second."""
        return self.data_dir / "control.sock"

    @property
    def database(self) -> Path:
        return self.data_dir / "node.sqlite"

    @property
    def extremities_file(self) -> Path:
        """The machine's measured idle and heavy extremities: one file per machine, shared by its nodes."""
        return Path(platformdirs.user_cache_dir(APP_NAME)) / "extremities.json"


@dataclass(frozen=True)
class Config:
    """Validated settings, read as `config.get("guests.cpus")` or through the typed helpers."""

    values: dict[str, Any]
    paths: Paths

    def get(self, name: str) -> Any:
        return self.values[name]

    def replace(self, **changes: Any) -> Config:
        """A copy with some options changed (keys written with '__' for '.'), validated again."""
        raw = dict(self.values)
        for key, value in changes.items():
            raw[option_named(key.replace("__", ".")).name] = value
        return Config(values=_validate_flat(raw, source="override"), paths=self.paths)

    @property
    def node_name(self) -> str:
        return self.values["node.name"] or socket.gethostname()

    @property
    def seeds(self) -> tuple[tuple[str, int], ...]:
        return tuple(parse_address(seed, option="node.seeds") for seed in self.values["node.seeds"])

    @property
    def cluster_key_file(self) -> Path:
        configured = self.values["cluster.key_file"]
        return Path(configured).expanduser() if configured else self.paths.data_dir / "cluster.key"

    @property
    def guest_cpus(self) -> int:
        return self.values["guests.cpus"] or os.cpu_count() or 1

    @property
    def memory_pool_bytes(self) -> int:
        configured = self.values["guests.memory_pool_mb"]
        if configured:
            return configured * 1024 * 1024
        return _installed_memory() // 2


@functools.cache
def _installed_memory() -> int:
    """The machine's RAM, read once: the guests' pool is asked for at every placement and guest change."""
    import psutil

    return psutil.virtual_memory().total


def load_config(paths: Paths, overrides: dict[str, Any] | None = None) -> Config:
    """Read the TOML file at paths.config_file (a missing file means all defaults).

    `overrides` come from the command line, keyed by option name ("node.port").
    """
    raw: dict[str, Any] = {}
    if paths.config_file.exists():
        try:
            document = tomllib.loads(paths.config_file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise ConfigError(f"{paths.config_file}: not valid TOML: {error}") from error
        raw = _flatten(document, source=str(paths.config_file))
    for name, value in (overrides or {}).items():
        if name not in _BY_NAME:
            raise ConfigError(f"unknown option {name!r}")
        raw[name] = value
    return Config(values=_validate_flat(raw, source=str(paths.config_file)), paths=paths)


def save_config(config: Config, names: Collection[str] | None = None) -> None:
    """Write options into the config file, editing it in place, atomically.

    `names` are the options the owner just changed (Settings → save): only their keys are
    written, so the owner's comments and layout, the other keys, and this run's command-line
    flags (`--port`, `--seed`) stay as they were. Without `names`, every option that differs
    from its default is written (a new file for a node started by a script). tomlkit writes the
    values, so any string (a newline, an ESC, a quote) reads back exactly as it was.
    """
    path = config.paths.config_file
    if path.exists():
        document = tomlkit.parse(path.read_text(encoding="utf-8"))
    else:
        document = tomlkit.document()
        document.add(tomlkit.comment("frost-tui configuration; every option is described in docs/configuration.md"))
    if names is None:
        names = [o.name for o in OPTIONS if config.values[o.name] != o.default]
    for name in names:
        option = _BY_NAME[name]
        if option.section not in document:
            document.add(option.section, tomlkit.table())
        document[option.section][option.key] = _toml_item(config.values[name])
    temporary = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, prefix=f".{path.name}.",
                                         delete=False) as handle:
            temporary = handle.name
            handle.write(tomlkit.dumps(document))
        os.replace(temporary, path)
    except OSError as error:   # (a full disk: the file keeps the settings it had, and no half-written copy)
        if temporary is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        raise StorageError(f"the settings were not saved to {path}: {error}") from error


def _toml_item(value: Any) -> Any:
    """A value as tomlkit writes it: tuples as arrays, maps as one inline table, as they were read."""
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        table.update({key: _toml_item(item) for key, item in value.items()})
        return table
    if isinstance(value, (list, tuple)):
        return [_toml_item(item) for item in value]
    return value


def parse_address(text: str, *, option: str) -> tuple[str, int]:
    """Parse "HOST:PORT" (IPv6 as "[::1]:PORT"), naming `option` when it is malformed."""
    host, sep, port_text = str(text).rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ConfigError(f"{option}: {text!r} is not HOST:PORT with a port from 1 to 65535")
    if not is_host(host):
        raise ConfigError(f"{option}: {text!r} does not start with an IP address or a host name")
    return host, int(port_text)


def describe_options() -> str:
    """Markdown documentation of every option, grouped by section (docs/configuration.md)."""
    out = []
    for section in SECTIONS:
        out += [f"## [{section}]", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        for o in (o for o in OPTIONS if o.section == section):
            bounds = ""
            if o.minimum is not None:
                bounds = f" Range {o.minimum:g} to {o.maximum:g}."
            if o.choices:
                bounds = " One of " + ", ".join(f"`{c}`" for c in o.choices) + "."
            out.append(f"| `{o.key}` | {o.kind.__name__} | `{_toml_value(o.default)}` | {o.doc}{bounds} |")
        out.append("")
    return "\n".join(out)


def _flatten(document: dict[str, Any], *, source: str) -> dict[str, Any]:
    flat = {}
    for section, table in document.items():
        if section not in SECTIONS:
            raise ConfigError(f"{source}: unknown section [{section}]{_suggest(section, SECTIONS)}")
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: [{section}] must be a table of options")
        for key, value in table.items():
            name = f"{section}.{key}"
            if name not in _BY_NAME:
                keys = [o.key for o in OPTIONS if o.section == section]
                raise ConfigError(f"{source}: unknown option {name!r}{_suggest(key, keys)}")
            flat[name] = value
    return flat


def _validate_flat(raw: dict[str, Any], *, source: str) -> dict[str, Any]:
    values = {}
    for option in OPTIONS:
        value = raw.get(option.name, option.default)
        values[option.name] = _check(option, value, source)
    if values["gossip.probe_timeout"] >= values["gossip.probe_interval"]:
        raise ConfigError(f"{source}: gossip.probe_timeout must be shorter than gossip.probe_interval")
    if values["checkpoints.min_interval"] > values["checkpoints.max_interval"]:
        raise ConfigError(f"{source}: checkpoints.min_interval must not exceed checkpoints.max_interval")
    advertised = values["node.advertise_host"]
    if advertised and not is_host(advertised):
        raise ConfigError(f"{source}: node.advertise_host must be an IP address or a host name, not {advertised!r}")
    for seed in values["node.seeds"]:
        parse_address(seed, option="node.seeds")
    for host in values["control.hosts"]:
        parse_address(host, option="control.hosts")
    if values["control.listen"]:
        parse_address(values["control.listen"], option="control.listen")
    try:
        parse_schedule(values["desk.schedule"])
    except ValueError as error:
        raise ConfigError(f"{source}: desk.schedule: {error}") from None
    return values


def _check(option: Option, value: Any, source: str) -> Any:
    where = f"{source}: {option.name}"
    if option.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if option.kind is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings, not {value!r}")
        return list(value)
    if option.kind is dict and option.items is float:
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                for k, v in value.items()):
            raise ConfigError(f"{where} must be a table of positive numbers, not {value!r}")
        return {k: float(v) for k, v in value.items()}
    if option.kind is dict:
        if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            raise ConfigError(f"{where} must be a table of strings, not {value!r}")
        return dict(value)
    if not isinstance(value, option.kind) or (option.kind is not bool and isinstance(value, bool)):
        raise ConfigError(f"{where} must be {_article(option.kind.__name__)}, not {value!r}")
    if option.minimum is not None and not option.minimum <= value <= option.maximum:
        raise ConfigError(f"{where} must be between {option.minimum:g} and {option.maximum:g}, not {value!r}")
    if option.choices and value not in option.choices:
        raise ConfigError(f"{where} must be one of {', '.join(option.choices)}, not {value!r}")
    return value


def _suggest(word: str, candidates) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _article(type_name: str) -> str:
    return {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false"}[type_name]


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_value(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return repr(value)

