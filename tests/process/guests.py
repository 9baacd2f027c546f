"""Find and measure a node's guest processes from outside, as the owner's `top` would."""

from __future__ import annotations

import hashlib
from pathlib import Path

import psutil

from frost_core.guest.spawn import SPARE_FOLDER
from frost_core.plugin.api import run_locally
from frost_core.plugin.loader import load_plugin_file

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


def guest_processes(node_pid: int) -> list[psutil.Process]:
    """The node's guests running a unit; the warm spare, still waiting in its own folder, is not one."""
    return [process for process, spare in _guest_runtime_children(node_pid) if not spare]


def spare_processes(node_pid: int) -> list[psutil.Process]:
    """The node's warm spare guest process (one at most), waiting for a unit."""
    return [process for process, spare in _guest_runtime_children(node_pid) if spare]


def _guest_runtime_children(node_pid: int) -> list[tuple[psutil.Process, bool]]:
    """Each process under the node that runs the guest runtime, and whether it waits as the spare."""
    try:
        children = psutil.Process(node_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if "frost_core.guest.child" in " ".join(child.cmdline()):
                found.append((child, Path(child.cwd()).name == SPARE_FOLDER))
        except psutil.NoSuchProcess:
            continue
    return found


def guest_cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
            total += times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return total


def reference_sha256(plugin_file: str, params: dict) -> str:
    """Run an assignment in this process, no guests, no node: the answer a node must match."""
    output = run_locally(load_plugin_file(PLUGINS / plugin_file), params)
    return hashlib.sha256(output.data).hexdigest()
