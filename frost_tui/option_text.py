"""How each kind of configuration option reads and writes as one line of text in a form field."""

from __future__ import annotations

import tomllib
from typing import Any

from frost_core import Option

KIND_WORDS = {int: "a whole number", float: "a number", str: "text", bool: "on or off",
              list: "a comma-separated list", dict: "a TOML table"}
BOOL_WORDS = {"on": True, "off": False, "true": True, "false": False, "yes": True, "no": False, "1": True, "0": False}


def parse_value(option: Option, text: str) -> Any:
    """The owner's text as the option's type, or ValueError naming the option and what it takes."""
    text = text.strip()
    if option.kind is list:
        return [item.strip() for item in text.split(",") if item.strip()]
    if option.kind is dict:
        return _parse_table(option, text)
    if option.kind is bool:
        if text.lower() not in BOOL_WORDS:
            raise ValueError(f"{option.name} must be on or off, not {text!r}")
        return BOOL_WORDS[text.lower()]
    if option.kind is str:
        value: Any = text
    else:
        try:
            value = int(text) if option.kind is int else float(text)
        except ValueError:
            raise ValueError(f"{option.name} must be {KIND_WORDS[option.kind]}, not {text!r}") from None
    if option.minimum is not None and not option.minimum <= value <= option.maximum:
        raise ValueError(f"{option.name} must be between {option.minimum:g} and {option.maximum:g}")
    if option.choices and value not in option.choices:
        raise ValueError(f"{option.name} must be one of {', '.join(option.choices)}")
    return value


def as_text(value: Any) -> str:
    """A value as the owner types it: 30 not 30.0, lists comma-separated, tables in TOML."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float) and value.is_integer():
        return f"{value:g}" if abs(value) < 1e15 else str(value)
    if isinstance(value, list):
        return ", ".join(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_quoted(k)} = {_quoted(v) if isinstance(v, str) else as_text(v)}"
                               for k, v in value.items()) + "}"
    return str(value)


def describe_accepts(option: Option) -> str:
    """What the field takes, in a few words: its range, its choices or its kind."""
    if option.choices:
        return "one of " + ", ".join(option.choices)
    if option.minimum is not None:
        return f"{KIND_WORDS[option.kind]} from {option.minimum:g} to {option.maximum:g}"
    return KIND_WORDS[option.kind]


def _parse_table(option: Option, text: str) -> dict[str, Any]:
    if not text:
        return {}
    try:
        value = tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{option.name} must be a table like {{\"KEY\" = \"VALUE\"}}: {error}") from None
    if option.items is float:
        if not isinstance(value, dict) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in value.values()):
            raise ValueError(f"{option.name} must be a table of positive numbers like {{\"KEY\" = 2.0}}")
        return {k: float(v) for k, v in value.items()}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ValueError(f"{option.name} must be a table of text values like {{\"KEY\" = \"VALUE\"}}")
    return value


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
