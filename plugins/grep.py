"""Finds the lines of input files that hold a piece of text, like `grep -F -n`: one unit per input file.

The input files stay on the assignment's master; each unit opens its file by name wherever it
runs. A step reads one bounded chunk at the file position kept in the state, so a unit may
stop and move mid-file; the lines it finds go to its output file `<input>.matches`, which
travels with its checkpoints and lands at the master. Everything is counted in integers and
bytes, so the output is bit-identical however often the units moved.
"""

from __future__ import annotations

import json

from frost_core import Done, Output, Param, Plugin, PluginError, WorkUnit, open_input, output_path

CHUNK = 64 * 1024
"""Bytes read per step: a few milliseconds of work."""
MAX_LINE = 1024 * 1024
"""A line is carried in the state until its end arrives, so its length is capped."""


class Grep(Plugin):
    name = "grep"
    version = "1.0"
    description = "Finds the lines of input files that contain a text (one unit per input file)."
    params = (
        Param("pattern", str, "error", "text to look for (plain text, not a regular expression)"),
        Param("inputs", "inputs", "input", "names of the input files to search, separated by commas"),
        Param("ignore_case", bool, False, "match the letters A-Z regardless of case"),
    )

    def split(self, params: dict) -> list[WorkUnit]:
        names = [name.strip() for name in params["inputs"].split(",") if name.strip()]
        if not names:
            raise PluginError("name at least one input file")
        if len(set(names)) != len(names):
            raise PluginError("an input file is named twice")
        if not params["pattern"]:
            raise PluginError("the pattern must not be empty")
        return [
            WorkUnit(index=i, data={"name": name, "pattern": params["pattern"], "ignore_case": params["ignore_case"]},
                     memory_bytes=16 * 1024 * 1024, cost=1.0)
            for i, name in enumerate(names)
        ]

    def start(self, unit: WorkUnit) -> dict:
        with open_input(unit.data["name"]) as reader:
            size = reader.seek(0, 2)
        pattern = unit.data["pattern"].encode()
        return {
            "name": unit.data["name"], "pattern": pattern.lower() if unit.data["ignore_case"] else pattern,
            "ignore_case": unit.data["ignore_case"], "size": size, "position": 0, "carry": b"", "lines": 0,
            "matches": 0,
        }

    def step(self, state: dict) -> dict | Done:
        with open_input(state["name"]) as reader:
            reader.seek(state["position"])
            chunk = reader.read(CHUNK)
        data = state["carry"] + chunk
        if chunk:
            *complete, carry = data.split(b"\n")
        else:  # the end of the file: what is left is its last line, unless the file ended with a newline
            complete, carry = ([data] if data else []), b""
        if len(carry) > MAX_LINE:
            raise PluginError(f"{state['name']}: line {state['lines'] + len(complete) + 1} is over {MAX_LINE} bytes")
        lines, matches, found = state["lines"], state["matches"], []
        for line in complete:
            lines += 1
            if state["pattern"] in (line.lower() if state["ignore_case"] else line):
                matches += 1
                found.append(b"%d:%s\n" % (lines, line))
        with open(output_path(f"{state['name']}.matches"), "ab") as writer:
            writer.write(b"".join(found))
        if not chunk:
            return Done({"name": state["name"], "lines": lines, "matches": matches, "bytes": state["position"]})
        return {**state, "position": state["position"] + len(chunk), "carry": carry, "lines": lines, "matches": matches}

    def progress(self, state: dict) -> float:
        return min(state["position"] / state["size"], 1.0) if state["size"] else 1.0

    def combine(self, params: dict, results: list) -> Output:
        files = []
        for index, result in enumerate(results):
            if not isinstance(result, dict) or not all(isinstance(result.get(k), int) for k in ("lines", "matches")):
                raise PluginError(f"result of unit {index} is not a match count")
            files.append({"name": result["name"], "lines": result["lines"], "matches": result["matches"],
                          "matches_file": f"{result['name']}.matches"})
        report = {
            "pattern": params["pattern"], "ignore_case": params["ignore_case"], "files": files,
            "total_matches": sum(f["matches"] for f in files),
        }
        return Output((json.dumps(report, indent=2, sort_keys=True) + "\n").encode(), "application/json", "grep.json")


plugin = Grep()
