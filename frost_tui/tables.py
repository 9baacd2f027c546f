"""Plain-text tables for the command line, in the spirit of condor_status: one row per thing."""

from __future__ import annotations

import time
from typing import Any

from frost_core import counted, member_state, member_waited


def render(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers] + [[_cell(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(text.ljust(width) for text, width in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def status(reply: dict[str, Any]) -> str:
    hosting = reply["hosting"]
    lines = [
        f"Node      {reply['name']} ({reply['node_id'][:8]}) at {reply['address']}",
        f"State     {hosting['state']}: {hosting['reason']}",
        *(f"Policy    {line}" for line in hosting.get("owner", ())),   # "Owner policy" in the UI
        f"Peers     {sum(1 for p in reply['peers'] if not p['is_self'] and p['state'] == 'alive')} alive",
        f"Memory    {_mib(hosting['memory_used_bytes'])} of {_mib(hosting['memory_pool_bytes'])} pool in use",
        *(f"Problem   {problem}" for problem in reply.get("problems", ())),
    ]
    lines += [f"{label:<10}{hosting[key]}"
              for label, key in (("Presence", "presence"), ("Sleep", "sleep"), ("Reach", "reach")) if hosting.get(key)]
    if reply["guests"]:
        lines += ["", render(
            ["TASK", "PLUGIN", "STATE", "PROGRESS", "CPU", "AT RISK", "MEMORY"],
            [[g["task_id"], g["plugin"], g["state"], f"{g['progress']:.0%}", _duration(g["cpu_seconds"]),
              _duration(g["cpu_since_checkpoint_seconds"]), _mib(g["memory_bytes"])] for g in reply["guests"]],
        )]
    else:
        lines += ["", "No guests."]
    return "\n".join(lines)


def peers(reply: list[dict[str, Any]]) -> str:
    now = time.time()
    return render(
        ["NAME", "ADDRESS", "STATE", "AVAILABLE", "CPUS", "FREE MEM", "GUESTS", "LAST HEARD"],
        [[p["name"] + (" (me)" if p.get("is_self") else ""), p["address"],
          p["state"] + (", quarantined" if p.get("quarantined") else ""), f"{p['available']:.2f}",
          p["cpus"], _mib(p["free_memory"]), p["guests"], _ago(now - p["last_seen"])] for p in reply],
    )


def plugins(reply: list[dict[str, Any]]) -> str:
    rows = [[p["name"], p["version"], p["source"], p["hash"][:12], plugin_status(p)] for p in reply]
    return render(["NAME", "VERSION", "SOURCE", "HASH", "STATUS"], rows)


def plugin_in_full(plugin: dict[str, Any]) -> str:
    """`plugins show`: what `submit` needs to know of one plugin, its parameters with what each accepts."""
    lines = [f"{plugin['name']} {plugin['version']}  ({plugin['source']}, {plugin['hash'][:12]})  {plugin['path']}",
             f"Status  {plugin_status(plugin)}"]
    if plugin["description"]:
        lines += ["", plugin["description"]]
    if plugin["params"]:
        rows = [[p["name"], p["kind"], _param_default(p), _param_accepts(p), p["help"]] for p in plugin["params"]]
        lines += ["", render(["PARAMETER", "TYPE", "DEFAULT", "ACCEPTS", "MEANING"], rows)]
        example = " ".join(f"--input {_param_default(p)}=PATH" if p["kind"] == "inputs"
                           else f"--param {p['name']}={_param_default(p)}" for p in plugin["params"][:2])
        lines += ["", f"frost-tui submit {plugin['name']} {example}"]
    else:
        lines += ["", "No parameters."]
    return "\n".join(lines)


def _param_default(param: dict[str, Any]) -> str:
    default = param["default"]
    if isinstance(default, bool):
        return "true" if default else "false"
    return f"{default:g}" if isinstance(default, float) else str(default)


def _param_accepts(param: dict[str, Any]) -> str:
    """Its range or choices, as `submit` checks them; for "inputs", what `--input` must name."""
    if param["choices"]:
        return ", ".join(map(str, param["choices"]))
    if param["kind"] == "inputs":
        return "names given with --input NAME=PATH"
    if param["kind"] == "bool":
        return "true, false"
    low, high = (None if bound is None else f"{bound:.0f}" if param["kind"] == "int" else f"{bound:g}"
                 for bound in (param["minimum"], param["maximum"]))
    if low is None and high is None:
        return ""
    if high is None:
        return f">= {low}"
    return f"<= {high}" if low is None else f"{low} to {high}"


def plugin_status(plugin: dict[str, Any]) -> str:
    if not plugin["ok"]:
        return f"BROKEN: {plugin['error']}"
    if plugin.get("superseded_by"):
        return f"ok, superseded by {plugin['superseded_by'][:12]}"
    return "ok (gang)" if plugin.get("gang") else "ok"


def assignments(reply: list[dict[str, Any]]) -> str:
    if not reply:
        return "No assignments."
    rows, now = [], time.time()
    for a in reply:
        if a.get("gang"):
            rows += gang_rows(a, now)
            continue
        waiting = next((u["waiting"] for u in a["units"] if u["state"] == "queued" and u.get("waiting")), "")
        made = f"gang of {a['gang_members']}" if a.get("gang_members") else f"{a['units_done']}/{a['unit_count']}"
        rows.append([a["id"], a["plugin"], a["state"], f"{a['progress']:.0%}", made,
                     a.get("error") or (f"queued: {waiting}" if waiting else "")
                     or (a.get("verification", "") if a["state"] == "done" else "")])
    return render(["ID", "PLUGIN", "STATE", "PROGRESS", "UNITS", "ERROR / WHY WAITING / CHECKED"], rows)


def units(reply: dict[str, Any], words: str) -> str:
    """An assignment's units (`FindUnits`' answer), and how many of them match `words`."""
    rows = [[u["task_id"], u.get("reported") or u["state"], u["host_name"] or "—", f"{u['progress']:.0%}", u["moves"],
             u["failures"], u["error"] or u["waiting"]] for u in reply["units"]]
    table = render(["UNIT", "STATE", "HOST", "PROGRESS", "MOVES", "FAILURES", "ERROR / WHY WAITING"], rows)
    matched, count = reply["matched"], reply["unit_count"]
    summary = (f"{matched:,} of {count:,} units {'matches' if matched == 1 else 'match'} {words!r}" if words
               else f"{count:,} units")
    return f"{table}\n{summary}" + (f"; the first {len(rows):,} shown" if len(rows) < matched else "")


def gang_rows(a: dict[str, Any], now: float) -> list[list[Any]]:
    """A gang assignment's row, then one per member: its host, superstep and time spent waiting at barriers."""
    gang = a["gang"]
    checkpoint = (f"last checkpoint before superstep {gang['checkpoint_superstep']}, taken {_ago(now - gang['checkpoint_at'])}"
                  if gang["checkpoint_superstep"] is not None else "no checkpoint yet")
    notes = [a.get("error") or gang["reason"], "" if gang["phase"] == "finished" else checkpoint]
    if gang["restarts"] or gang["moves"]:
        notes.append(f"{counted(gang['moves'], 'move')}, {counted(gang['restarts'], 'restart')}")
    rows = [[a["id"], a["plugin"], a["state"], f"superstep {gang['superstep']}", f"gang of {len(gang['members'])}",
             "; ".join(note for note in notes if note)]]
    for m in gang["members"]:
        state = member_state(m["at_barrier"], bool(m["host"]), gang["phase"])
        rows.append([f"  .{m['rank']}", m["host_name"] or "—", state, f"superstep {m['superstep']}", "",
                     member_waited(bool(m["host"]), _duration(m["waited_seconds"]))])
    return rows


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _mib(count: int) -> str:
    return f"{count / (1024 * 1024):.0f} MiB"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def _ago(seconds: float) -> str:
    return "now" if seconds < 1 else f"{_duration(seconds)} ago"
