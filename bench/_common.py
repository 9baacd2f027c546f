"""What every benchmark shares: the machine description and the results file."""

import json
import os
import platform
import sys
import time
from pathlib import Path

import psutil

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """Describe the machine a figure was measured on, since these machines are shared and noisy."""
    freq = psutil.cpu_freq()
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "cpu_mhz": round(freq.current) if freq else None,
        "memory_bytes": psutil.virtual_memory().total,
        "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def print_table(headers: list[str], rows: list[list]) -> None:
    """Print rows under headers in aligned columns."""
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def write_results(name: str, figures: dict) -> Path:
    """Write `figures` with the machine description to bench/results/NAME.json."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps({"benchmark": name, "machine": machine(), "figures": figures}, indent=2))
    print(f"\nwrote {path}")
    return path


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)
