"""docs/cli.schema.json and docs/frost-tui.1, made from the parser and the result types so neither drifts.

Run `python -m frost_tui.cli_docs` after changing a command; a test fails while the files are stale.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import sys
import types
import typing
from importlib.metadata import version
from pathlib import Path
from typing import Any

from frost_tui.cli import EXIT_CODES, JSON_SCHEMA_VERSION, RESULTS, build_parser

DOCS = Path(__file__).resolve().parents[1] / "docs"
SCHEMA_FILE = DOCS / "cli.schema.json"
MAN_PAGE = DOCS / "frost-tui.1"


def json_schema() -> dict[str, Any]:
    """One JSON Schema (2020-12) for every document `--json` prints: a result on stdout, an error on stderr."""
    definitions: dict[str, Any] = {}
    documents = [{
        "type": "object", "additionalProperties": False, "required": ["schema", "command", "ok", "result"],
        "properties": {"schema": {"const": JSON_SCHEMA_VERSION}, "command": {"const": command},
                       "ok": {"type": "boolean"}, "result": _schema_of(hint, definitions)},
    } for command, hint in RESULTS.items()]
    documents.append({
        "type": "object", "additionalProperties": False, "required": ["schema", "command", "ok", "exit_code", "error"],
        "properties": {
            "schema": {"const": JSON_SCHEMA_VERSION}, "command": {"type": "string"}, "ok": {"const": False},
            "exit_code": {"enum": sorted(code for code in EXIT_CODES if code)},
            "error": {"type": "object", "additionalProperties": False, "required": ["title", "message"],
                      "properties": {"title": {"type": "string"}, "message": {"type": "string"}}},
        },
    })
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "frost-tui --json output",
        "description": "Every command prints one of these documents; see docs/cli.md.",
        "oneOf": documents,
        "$defs": dict(sorted(definitions.items())),
    }


def _schema_of(hint: Any, definitions: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of `hint` as `frost_core.wire.messages.to_plain` renders it."""
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return {}
    if hint in simple:
        return {"type": simple[hint]}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema_of(arg, definitions) for arg in args]}
    if origin is tuple:
        return {"type": "array", "items": _schema_of(args[0], definitions)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema_of(args[1], definitions)}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [member.value for member in hint]}
    if dataclasses.is_dataclass(hint):
        if hint.__name__ not in definitions:
            definitions[hint.__name__] = {}  # reserved first: a dataclass may refer to itself
            hints = typing.get_type_hints(hint)
            fields = [field.name for field in dataclasses.fields(hint)]
            definitions[hint.__name__] = {
                "type": "object", "additionalProperties": False, "required": fields,
                "properties": {name: _schema_of(hints[name], definitions) for name in fields},
            }
        return {"$ref": f"#/$defs/{hint.__name__}"}
    raise TypeError(f"no JSON Schema for {hint!r}")


def man_page() -> str:
    """frost-tui(1) in roff, from the same parser `--help` prints."""
    parser = build_parser()
    lines = [
        f'.TH FROST-TUI 1 "" "frost-tui {version("frost-tui")}" "User Commands"',
        ".SH NAME", r"frost-tui \- share idle desk CPU with your peers",
        ".SH SYNOPSIS", _roff(_usage(parser)),
        ".SH DESCRIPTION", _roff(parser.description or ""),
        "Every command also takes \\fB\\-\\-data\\-dir\\fR, \\fB\\-\\-config\\fR and \\fB\\-\\-cluster\\-key\\-file\\fR",
        "(below), and \\fB\\-\\-json\\fR: print one JSON document, shaped as docs/cli.md and docs/cli.schema.json",
        "describe, and errors as JSON on stderr.",
        ".SH OPTIONS", *_options(parser),
        ".SH COMMANDS",
    ]
    for name, sub in _commands(parser):
        lines += [f'.SS "{_roff(name)}"', _roff(_usage(sub)), ".PP", _roff(sub.description or ""),
                  *_options(sub, skip=_SHARED)]
    lines += [".SH EXIT STATUS"]
    for code, meaning in EXIT_CODES.items():
        lines += [".TP", f".B {code}", _roff(meaning)]
    lines += [".SH SEE ALSO", "docs/cli.md, docs/configuration.md", ""]
    return "\n".join(lines)


def _commands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every documented command, nested ones ("key show") included, in the order --help lists them."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {choice.dest for choice in action._choices_actions}
            for name, sub in action.choices.items():
                if name in helped and sub.add_help:
                    found.append((sub.prog.removeprefix("frost-tui "), sub))
                    found += _commands(sub)
    return found


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=100)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return " ".join(formatter.format_help().split())


_SHARED = frozenset({"help", "data_dir", "config", "cluster_key_file", "json"})
"""Options every command takes, described once under OPTIONS rather than under each command."""


def _options(parser: argparse.ArgumentParser, skip: frozenset[str] = frozenset()) -> list[str]:
    lines = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS or action.dest in skip:
            continue
        formatter = argparse.HelpFormatter(prog=parser.prog, width=100)
        lines += [".TP", f"\\fB{_roff(formatter._format_action_invocation(action))}\\fR", _roff(action.help or "")]
    return lines


def _roff(text: str) -> str:
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return "\\&" + text if text[:1] in (".", "'") else text


def main() -> int:
    SCHEMA_FILE.write_text(json.dumps(json_schema(), indent=2) + "\n", encoding="utf-8")
    MAN_PAGE.write_text(man_page(), encoding="utf-8")
    print(f"wrote {SCHEMA_FILE} and {MAN_PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
