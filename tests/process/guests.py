"""Find and measure a node's guest processes from outside, as the owner's `top` would."""

from __future__ import annotations

import hashlib
from pathlib import Path

import psutil

from frost_core.guest.spawn import SPARE_FOLDER
from frost_core.guest.warm import IDLE_FOLDER
from frost_core.plugin.api import run_locally
from frost_core.plugin.loader import load_plugin_file

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


def guest_processes(node_pid: int) -> list[psutil.Process]:
    """The node's guests running a unit; the warm spare and a process waiting for its assignment's next
    unit (each in a folder of its own, see `frost_core.guest.warm`) are not."""
    return [process for process, folder in _guest_runtime_children(node_pid)
            if folder != SPARE_FOLDER and not folder.startswith(IDLE_FOLDER)]


def spare_processes(node_pid: int) -> list[psutil.Process]:
    """The node's warm spare guest processes (one per guest CPU, up to `spares_for`'s cap), waiting for a unit."""
    return [process for process, folder in _guest_runtime_children(node_pid) if folder == SPARE_FOLDER]


def _guest_runtime_children(node_pid: int) -> list[tuple[psutil.Process, str]]:
    """Each process under the node that runs the guest runtime, and the name of the folder it is in."""
    try:
        children = psutil.Process(node_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if "frost_core.guest.child" in " ".join(child.cmdline()):
                found.append((child, Path(child.cwd()).name))
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
