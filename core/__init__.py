"""The frost-tui peer node's public surface: what the UI, the CLI and plugin authors may use.

Everything here is re-exported one by one from the module that defines it, and loaded lazily
(PEP 562): the guest child and the plugin worker import `frost_core` before they lower their
priority, so `import frost_core` must not pull in trio, psutil or anything else heavy.
Modules below `frost_core.` are the node's insides; the UI imports nothing but this package.
Never imports Textual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frost_core.api.wording import counted, member_state, member_waited, said_until
    from frost_core.api.commands import (
        AddPlugin,
        CancelAssignment,
        ClearQuarantine,
        Command,
        EvictGuests,
        FinishThenPause,
        HandOffGuests,
        JoinCluster,
        Measurement,
        MoveTask,
        PauseHosting,
        Remeasure,
        RemovePlugin,
        ResumeHosting,
        SaveSettings,
        SubmitAssignment,
        Submitted,
    )
    from frost_core.api.errors import (
        AuthenticationError,
        CheckpointError,
        ConfigError,
        FrostError,
        NodeUnavailableError,
        PluginError,
        ProtocolError,
    )
    from frost_core.api.node_api import EMBEDDED, Link, NodeApi
    from frost_core.api.queries import (
        FetchResult,
        FindUnits,
        FoundUnits,
        GetAssignment,
        GetLedger,
        GetStatus,
        ListAssignments,
        ListEvents,
        ListPeers,
        ListPlugins,
        NodeStatus,
        Query,
        ReadResult,
        ResultData,
        SavedResult,
    )
    from frost_core.api.ledger import ContributorView, LedgerDayView, LedgerPeerView, LedgerView
    from frost_core.api.snapshot import (
        AssignmentView,
        EventView,
        GangMemberView,
        GangView,
        GuestView,
        HostingView,
        NodeSnapshot,
        ParamView,
        PeerView,
        PluginView,
        ResourceSample,
        UnitView,
    )
    from frost_core.config import (
        DEFAULT_PORT, OPTIONS, Config, Option, Paths, describe_options, load_config, parse_address, save_config,
        option_named, waiting_for_restart,
    )
    from frost_core.logs import configure_logging
    from frost_core.measure.calibrate import load_or_measure
    from frost_core.node.attached import AttachedNode, local_target, remote_target
    from frost_core.node.control import call_node, plain_reply, running_node_socket
    from frost_core.node.headless import run_headless
    from frost_core.node.identity import load_owner_token, remember_owner_token, remembered_owner_token
    from frost_core.node.views import plugin_views
    from frost_core.node.wiring import Node
    from frost_core.plugin.api import (
        Done,
        Output,
        Param,
        Plugin,
        RowBands,
        WorkUnit,
        encode_png,
        open_input,
        output_path,
        parse_params,
        run_locally,
    )
    from frost_core.plugin.gang import GangPlugin, MemberCheckpoint, Superstep, run_gang_locally
    from frost_core.plugin.limits import MAX_MEMBERS, MAX_OUTBOX_BYTES, MAX_RESULT_BYTES, MAX_STATE_BYTES, MEMBER_MEMORY
    from frost_core.plugin.loader import load_plugin_file
    from frost_core.plugin.registry import PluginRegistry
    from frost_core.policies.intents import parse_until
    from frost_core.sim import main as run_simulator
    from frost_core.wire.security import ClusterKey

# public name -> (defining module, name there); the TYPE_CHECKING block above says the same to type checkers
_EXPORTS: dict[str, tuple[str, str]] = {
    # the node and how to reach a running one
    "Node": ("frost_core.node.wiring", "Node"),
    "NodeApi": ("frost_core.api.node_api", "NodeApi"),
    "Link": ("frost_core.api.node_api", "Link"),
    "EMBEDDED": ("frost_core.api.node_api", "EMBEDDED"),
    "AttachedNode": ("frost_core.node.attached", "AttachedNode"),
    "local_target": ("frost_core.node.attached", "local_target"),
    "remote_target": ("frost_core.node.attached", "remote_target"),
    "run_headless": ("frost_core.node.headless", "run_headless"),
    "call_node": ("frost_core.node.control", "call_node"),
    "plain_reply": ("frost_core.node.control", "plain_reply"),
    "running_node_socket": ("frost_core.node.control", "running_node_socket"),
    # configuration and logging
    "Config": ("frost_core.config", "Config"),
    "Option": ("frost_core.config", "Option"),
    "OPTIONS": ("frost_core.config", "OPTIONS"),
    "DEFAULT_PORT": ("frost_core.config", "DEFAULT_PORT"),
    "Paths": ("frost_core.config", "Paths"),
    "describe_options": ("frost_core.config", "describe_options"),
    "load_config": ("frost_core.config", "load_config"),
    "parse_address": ("frost_core.config", "parse_address"),
    "save_config": ("frost_core.config", "save_config"),
    "waiting_for_restart": ("frost_core.config", "waiting_for_restart"),
    "option_named": ("frost_core.config", "option_named"),
    "configure_logging": ("frost_core.logs", "configure_logging"),
    "counted": ("frost_core.api.wording", "counted"),
    "member_state": ("frost_core.api.wording", "member_state"),
    "member_waited": ("frost_core.api.wording", "member_waited"),
    "said_until": ("frost_core.api.wording", "said_until"),
    # commands change the node (the UI sends them one way; the control socket answers them)
    **{name: ("frost_core.api.commands", name) for name in (
        "AddPlugin", "CancelAssignment", "ClearQuarantine", "Command", "EvictGuests", "FinishThenPause", "HandOffGuests",
        "JoinCluster", "Measurement", "MoveTask",
        "PauseHosting", "Remeasure", "RemovePlugin", "ResumeHosting", "SaveSettings", "SubmitAssignment", "Submitted")},
    # queries change nothing
    **{name: ("frost_core.api.queries", name) for name in (
        "FetchResult", "FindUnits", "FoundUnits", "GetAssignment", "GetLedger", "GetStatus", "ListAssignments", "ListEvents",
        "ListPeers", "ListPlugins", "NodeStatus", "Query", "ReadResult", "ResultData", "SavedResult")},
    # snapshot views
    **{name: ("frost_core.api.snapshot", name) for name in (
        "AssignmentView", "EventView", "GangMemberView", "GangView", "GuestView", "HostingView", "NodeSnapshot",
        "ParamView", "PeerView", "PluginView", "ResourceSample", "UnitView")},
    **{name: ("frost_core.api.ledger", name) for name in (
        "ContributorView", "LedgerDayView", "LedgerPeerView", "LedgerView")},
    # errors
    **{name: ("frost_core.api.errors", name) for name in (
        "AuthenticationError", "CheckpointError", "ConfigError", "FrostError", "NodeUnavailableError",
        "PluginError", "ProtocolError")},
    # the plugin author API
    **{name: ("frost_core.plugin.api", name) for name in (
        "Done", "Output", "Param", "Plugin", "RowBands", "WorkUnit", "encode_png", "open_input", "output_path",
        "parse_params", "run_locally")},
    # the gang plugin author API
    **{name: ("frost_core.plugin.gang", name) for name in ("GangPlugin", "MemberCheckpoint", "Superstep", "run_gang_locally")},
    "MAX_MEMBERS": ("frost_core.plugin.limits", "MAX_MEMBERS"),
    "MAX_OUTBOX_BYTES": ("frost_core.plugin.limits", "MAX_OUTBOX_BYTES"),
    "MAX_RESULT_BYTES": ("frost_core.plugin.limits", "MAX_RESULT_BYTES"),
    "MAX_STATE_BYTES": ("frost_core.plugin.limits", "MAX_STATE_BYTES"),
    "MEMBER_MEMORY": ("frost_core.plugin.limits", "MEMBER_MEMORY"),
    "load_plugin_file": ("frost_core.plugin.loader", "load_plugin_file"),
    # what the command line needs besides the node
    "PluginRegistry": ("frost_core.plugin.registry", "PluginRegistry"),
    "load_or_measure": ("frost_core.measure.calibrate", "load_or_measure"),
    "load_owner_token": ("frost_core.node.identity", "load_owner_token"),
    "remember_owner_token": ("frost_core.node.identity", "remember_owner_token"),
    "remembered_owner_token": ("frost_core.node.identity", "remembered_owner_token"),
    "parse_until": ("frost_core.policies.intents", "parse_until"),
    "plugin_views": ("frost_core.node.views", "plugin_views"),
    "run_simulator": ("frost_core.sim", "main"),
    "ClusterKey": ("frost_core.wire.security", "ClusterKey"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
