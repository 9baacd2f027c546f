"""Node start + submit -> first result on a lightly used desk: the default owner policy against `always`.

Question: does a new user's first assignment run out of the box? The issue that led here saw no
unit start after 5 minutes: the node took its own start-up and every `frost-tui status` for a busy
owner and held all new guests for 300 s. Timed: from starting `frost-tui --headless` (empty
config: every default) to the Mandelbrot's result, with another program using ~30 % of a core and
`frost-tui status` called every second. Baseline: the same with `[owner] policy = "always"` (a
dedicated server: the owner policy never stops guests). Goal: the default within a few seconds of
the baseline. Usage: .venv/bin/python bench/owner_first_result.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import print_table, write_results  # noqa: E402

from frost_core.wire.security import ClusterKey  # noqa: E402
from tests.nodes import start_node  # noqa: E402
from tests.waiting import wait_for  # noqa: E402

LIGHT = ("import time\nend = time.monotonic() + 300\nwhile time.monotonic() < end:\n"
         "    t = time.monotonic() + 0.03\n    while time.monotonic() < t: pass\n    time.sleep(0.07)\n")
MANDELBROT = ("mandelbrot", "--param", "width=160", "--param", "height=96", "--param", "rows_per_unit=16",
              "--param", "max_iter=200")
LIMIT = 50.0


def one_run(folder: Path, config: str) -> dict:
    key = folder / "cluster.key"
    ClusterKey.generate().save(key)
    light = subprocess.Popen([sys.executable, "-c", LIGHT], start_new_session=True)
    stop = threading.Event()
    began = time.monotonic()
    node = start_node(folder / "node", key_file=key, base_config="", extra_config=config, log_level="info")

    def check_every_second() -> None:
        while not stop.wait(1.0):
            node.cli("status", check=False)

    checker = threading.Thread(target=check_every_second)
    checker.start()
    try:
        node.cli("submit", *MANDELBROT)
        submitted = time.monotonic()
        try:
            wait_for(lambda: (a := node.call("assignments")) and a[0]["state"] == "done", timeout=LIMIT,
                     what="the result", interval=0.1)
            done = time.monotonic()
        except AssertionError:
            done = None
        states = node.call("status")["hosting"]
        held = [e["message"] for e in node.call("events") if e["kind"] == "owner"]
    finally:
        stop.set()
        checker.join()
        node.stop()
        light.kill()
        light.wait()
    return {"start_to_result_s": round(done - began, 2) if done else None,
            "submit_to_result_s": round(done - submitted, 2) if done else None,
            "last_state": states["state"], "owner_events": held}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[dict]] = {"default (share)": [], "always": []}
    for _ in range(args.rounds):
        for name, config in (("default (share)", ""), ("always", '[owner]\npolicy = "always"\n')):
            with tempfile.TemporaryDirectory(prefix="frost-first-") as folder:
                results[name].append(one_run(Path(folder), config))
    rows = [[name, i + 1, r["start_to_result_s"] or f"none in {LIMIT:.0f} s", r["submit_to_result_s"] or "-",
             len(r["owner_events"])] for name, runs in results.items() for i, r in enumerate(runs)]
    print_table(["policy", "round", "start -> result s", "submit -> result s", "owner events"], rows)
    for name, runs in results.items():
        for r in runs:
            for message in r["owner_events"][:3]:
                print(f"   {name}: {message}")
    write_results("owner_first_result", {"limit_s": LIMIT, "runs": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
