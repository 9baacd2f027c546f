"""PLACEHOLDER information policy: available CPU from the load average, until issue 5's measurement.

FROST measures what a lowest-priority process actually receives; this stand-in only estimates
it as idle cores, (cpus - load) clamped to [0, cpus], in units of one core. It is marked as a
placeholder everywhere it is shown so nobody mistakes it for the real figure.
"""

from __future__ import annotations

import os

import psutil


def placeholder_available(cpus: int, guests: int) -> float:
    """Idle cores for guests: cpus minus the load that is not our own guests, within [0, cpus]."""
    if hasattr(os, "getloadavg"):
        load = os.getloadavg()[0]
    else:
        load = psutil.cpu_percent(interval=None) / 100 * (os.cpu_count() or 1)
    return round(min(float(cpus), max(0.0, cpus - max(0.0, load - guests))), 3)


def owner_cpu_percent(guest_cpu_percent: float) -> float:
    """CPU used by everything but our guests, in percent of one core, since the previous call."""
    total = psutil.cpu_percent(interval=None) * (os.cpu_count() or 1)
    return max(0.0, total - guest_cpu_percent)
