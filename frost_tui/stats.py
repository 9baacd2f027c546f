"""`frost-tui stats`: the ledger for people, as a table, JSON or CSV for the office wiki."""

from __future__ import annotations

import csv
import io
import re
import time

from frost_core import ConfigError, ContributorView, LedgerPeerView, LedgerView

from frost_tui import tables

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
CSV_HEADER = ["section", "key", "name", "given_cpu_seconds", "received_cpu_seconds"]


def parse_duration(text: str) -> float:
    """'90s', '30m', '24h', '7d', '2w' or plain seconds -> seconds; a clear ConfigError for anything else."""
    match = _DURATION.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise ConfigError(f"--since {text!r}: expected a positive duration such as 90s, 30m, 24h, 7d or 2w")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def since_of(text: str | None, now: float) -> float:
    """The wall time `--since` names (None: the whole ledger)."""
    return 0.0 if text is None else now - parse_duration(text)


def as_text(view: LedgerView) -> str:
    since = "all time" if view.since <= 0 else "since " + time.strftime("%Y-%m-%d %H:%M", time.localtime(view.since))
    lines = [f"Given     {_cpu(view.given)}  ({since}; normalised CPU: speed units x seconds)",
             f"Received  {_cpu(view.received)}"]
    if view.refused:
        lines.append(f"Refused   {view.refused} forged or altered summaries from peers")
    lines += ["", tables.render(["PEER", "GIVEN", "RECEIVED"],
                                [[named(p), _cpu(p.given), _cpu(p.received)] for p in view.peers])
              if view.peers else "Nothing given or received yet."]
    if view.days:
        lines += ["", tables.render(["DAY (UTC)", "GIVEN", "RECEIVED"],
                                    [[d.day, _cpu(d.given), _cpu(d.received)] for d in view.days])]
    if view.contributors:
        lines += ["", "Top contributors (each node's own signed totals, all time)",
                  tables.render(["NODE", "GIVEN", "RECEIVED"],
                                [[named(c), _cpu(c.given), _cpu(c.received)] for c in view.contributors])]
    return "\n".join(lines)


def as_csv(view: LedgerView) -> str:
    """One table for a spreadsheet: per day, per peer and per contributor rows, CPU in normalised seconds."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for d in view.days:
        writer.writerow(["day", d.day, "", f"{d.given:.3f}", f"{d.received:.3f}"])
    for p in view.peers:
        writer.writerow(["peer", p.node_id, p.name, f"{p.given:.3f}", f"{p.received:.3f}"])
    for c in view.contributors:
        writer.writerow(["contributor", c.node_id, c.name, f"{c.given:.3f}", f"{c.received:.3f}"])
    return out.getvalue()


def named(row: LedgerPeerView | ContributorView) -> str:
    """A node's name, and "(me)" on this node's own row (its own units run here), as in the peers table; the
    Ledger tab's too."""
    return row.name + (" (me)" if row.is_self else "")


def _cpu(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"
