"""Find and measure a node's guest processes from outside, as the owner's `top` would."""

from __future__ import annotations

import hashlib
from pathlib import Path

import psutil

from frost_core.plugin_api import run_locally
from frost_core.plugin_loader import load_plugin_file

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


def guest_processes(node_pid: int) -> list[psutil.Process]:
    try:
        children = psutil.Process(node_pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    guests = []
    for child in children:
        try:
            if "frost_core.guest.child" in " ".join(child.cmdline()):
                guests.append(child)
        except psutil.NoSuchProcess:
            continue
    return guests


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
