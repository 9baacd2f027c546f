"""What a plugin author writes against: `Plugin`, `Param`, `WorkUnit`, `Done`, `Output`.

A plugin module exposes one instance as the module-level name `plugin`. The runtime calls
`split` once on the assignment's master, `start` and `step` wherever a unit happens to run
(between two steps is a migration point), and `combine` back on the master. Everything that
crosses a process or a machine is plain CBOR data (`frost_core.plugin.plain`).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import math
import struct
import tempfile
import zlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, BinaryIO, Protocol


from frost_core.api.errors import PluginError
from frost_core.plugin.limits import MAX_OUTPUT_NAME_BYTES, MAX_RESULT_BYTES, MAX_STATE_BYTES, check_file_name
from frost_core.plugin.plain import check_plain, decode_plain, encode_plain

API_VERSION = 1
KINDS = ("int", "float", "str", "bool", "inputs")
KIND_WORDS = {"int": "a whole number", "float": "a number", "str": "text", "bool": "true or false",
              "inputs": "input file names separated by commas"}
"""How an error names each kind: "must be a whole number", never "is not a int"."""
_TRUE_WORDS = {"true", "yes", "on", "1"}
_FALSE_WORDS = {"false", "no", "off", "0"}


@dataclasses.dataclass(frozen=True)
class Param:
    """One typed assignment parameter; the UI builds its form from these fields.

    `kind` is one of "int", "float", "str", "bool" (the Python types are accepted too and
    stored as their names), or "inputs": the names of input files, separated by commas, that
    units open with `open_input`; whoever submits gives a file for each name (the UI a path
    field per name, the CLI `--input NAME=PATH`). A declaration that contradicts itself raises PluginError at import,
    so a broken plugin is caught when it is registered rather than when someone submits.
    """

    name: str
    kind: str
    default: Any
    help: str = ""
    minimum: int | float | None = None
    maximum: int | float | None = None
    choices: tuple[Any, ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.kind, type):
            object.__setattr__(self, "kind", self.kind.__name__)
        if self.kind == "float" and _is_number(self.default):
            object.__setattr__(self, "default", float(self.default))
        if self.choices is not None:
            object.__setattr__(self, "choices", tuple(self.choices))
        where = f"parameter {self.name!r}"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise PluginError(f"{where}: the name must be a Python identifier")
        if self.kind not in KINDS:
            raise PluginError(f"{where}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if (self.minimum is not None or self.maximum is not None) and self.kind not in ("int", "float"):
            raise PluginError(f"{where}: minimum/maximum only apply to int and float parameters")
        for label, bound in (("minimum", self.minimum), ("maximum", self.maximum)):
            if bound is not None and not _is_number(bound):
                raise PluginError(f"{where}: {label} must be a number, not {bound!r}")
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise PluginError(f"{where}: minimum {self.minimum} is above maximum {self.maximum}")
        if self.choices is not None:
            if not self.choices:
                raise PluginError(f"{where}: choices must not be empty")
            for choice in self.choices:
                if not _has_kind(choice, self.kind):
                    raise PluginError(f"{where}: choice {choice!r} is not {KIND_WORDS[self.kind]}")
        problem = self.check(self.default)
        if problem:
            raise PluginError(f"{where}: default {self.default!r} {problem}")

    def check(self, value: object) -> str | None:
        """Say what is wrong with a typed value, or None when it is acceptable."""
        if not _has_kind(value, self.kind):
            return f"is not {KIND_WORDS[self.kind]}"
        if self.kind == "float" and not math.isfinite(value):  # type: ignore[arg-type]
            return "is not a finite number"
        if self.kind == "inputs":
            try:
                for name in split_names(value):  # type: ignore[arg-type]
                    check_file_name(name, "input file")
            except PluginError as error:
                return f"names a bad file: {error.message}"
        if self.minimum is not None and value < self.minimum:  # type: ignore[operator]
            return f"is below the minimum {self.minimum}"
        if self.maximum is not None and value > self.maximum:  # type: ignore[operator]
            return f"is above the maximum {self.maximum}"
        if self.choices is not None and value not in self.choices:
            return f"is not one of {', '.join(map(str, self.choices))}"
        return None

    def to_plain(self) -> dict:
        """This declaration as CBOR/JSON data (for the validation pipe and the UI)."""
        plain = dataclasses.asdict(self)
        plain["choices"] = list(self.choices) if self.choices is not None else None
        return plain

    @classmethod
    def from_plain(cls, plain: Mapping[str, Any]) -> Param:
        """Rebuild a declaration sent by `to_plain`, validating it again."""
        choices = plain.get("choices")
        return cls(
            name=plain["name"],
            kind=plain["kind"],
            default=plain["default"],
            help=plain.get("help", ""),
            minimum=plain.get("minimum"),
            maximum=plain.get("maximum"),
            choices=tuple(choices) if choices is not None else None,
        )


@dataclasses.dataclass(frozen=True)
class WorkUnit:
    """One independently runnable piece of an assignment.

    `memory_bytes` is what a host reserves for it (a host refuses what does not fit);
    `cost` is a relative estimate of its run time that schedulers compare between units.
    """

    index: int
    data: dict
    memory_bytes: int
    cost: float

    def __post_init__(self) -> None:
        if not isinstance(self.index, int) or isinstance(self.index, bool) or self.index < 0:
            raise PluginError(f"work unit index {self.index!r} must be an int >= 0")
        if not isinstance(self.data, dict):
            raise PluginError(f"work unit {self.index}: data must be a dict, not {type(self.data).__name__}")
        check_plain(self.data, f"work unit {self.index} data")
        if not isinstance(self.memory_bytes, int) or isinstance(self.memory_bytes, bool) or self.memory_bytes < 0:
            raise PluginError(f"work unit {self.index}: memory_bytes must be an int >= 0")
        if not _is_number(self.cost) or not math.isfinite(self.cost) or self.cost < 0:
            raise PluginError(f"work unit {self.index}: cost must be a finite number >= 0")

    def to_plain(self) -> dict:
        """This unit as CBOR data, the form the master stores and sends to a guest."""
        return {"index": self.index, "data": self.data, "memory_bytes": self.memory_bytes, "cost": float(self.cost)}

    @classmethod
    def from_plain(cls, plain: object) -> WorkUnit:
        """Rebuild a unit from `to_plain` data, raising PluginError on anything malformed."""
        if not isinstance(plain, dict) or set(plain) != {"index", "data", "memory_bytes", "cost"}:
            raise PluginError("a work unit must be a map with index, data, memory_bytes and cost")
        return cls(plain["index"], plain["data"], plain["memory_bytes"], plain["cost"])


@dataclasses.dataclass(frozen=True)
class Done:
    """Returned by `step` when the unit has finished; `result` is plain CBOR data."""

    result: Any


@dataclasses.dataclass(frozen=True)
class Output:
    """An assignment's final result: bytes, their media type and a suggested file name."""

    data: bytes
    media_type: str
    filename: str

    def __post_init__(self) -> None:
        if not isinstance(self.data, bytes):
            raise PluginError(f"output data must be bytes, not {type(self.data).__name__}")
        if not isinstance(self.media_type, str) or "/" not in self.media_type:
            raise PluginError(f"output media type {self.media_type!r} is not like 'image/png'")
        check_file_name(self.filename, "output file", MAX_OUTPUT_NAME_BYTES)


class Plugin(abc.ABC):
    """Base class of every calculation plugin; see docs/plugins.md for a worked example.

    Rules that keep results bit-identical whatever happens to the units: `step` depends only
    on its state (no clocks, no global counters, no unseeded randomness), does a bounded chunk
    of work (well under a second), and `combine` reads results in unit index order.
    """

    name: str = ""
    version: str = ""
    description: str = ""
    params: tuple[Param, ...] = ()

    @abc.abstractmethod
    def split(self, params: dict) -> list[WorkUnit]:
        """Cut an assignment into work units, numbered 0, 1, 2, ... in order."""

    @abc.abstractmethod
    def start(self, unit: WorkUnit) -> Any:
        """Give the initial state of a unit."""

    @abc.abstractmethod
    def step(self, state: Any) -> Any:
        """Advance by one bounded chunk: the new state, or `Done(result)` when finished."""

    @abc.abstractmethod
    def progress(self, state: Any) -> float:
        """How far this unit is, in [0, 1], for the UI."""

    @abc.abstractmethod
    def combine(self, params: dict, results: list) -> Output:
        """Merge the units' results (given in unit index order) into the assignment's output."""


class RowBands(Plugin):
    """A plugin whose work units are bands of image rows, one row per step, joined into a PNG.

    Most image plugins cut the picture the same way (the MINIPROCs Mandelbrot did), so the
    cutting, the stepping and the joining live here once: a subclass declares its `params`
    (with `width`, `height` and `rows_per_unit`), which of them a row needs (`view_params`),
    what a row costs, and how to render row `y`. Finished rows are kept as a list and joined
    once, so a band costs linear time however many rows it has.
    """

    view_params: tuple[str, ...] = ("width", "height")
    image_name: str = "image"  # the output is "{image_name}-{width}x{height}.png"

    @abc.abstractmethod
    def render_row(self, view: dict, y: int) -> bytes:
        """The 8-bit RGB pixels of row `y` (3 x width bytes), from the view's parameters only."""

    def row_cost(self, params: dict) -> float:
        """A row's relative cost, for placement; by default one per pixel."""
        return float(params["width"])

    def split(self, params: dict) -> list[WorkUnit]:
        width, height, band = params["width"], params["height"], params["rows_per_unit"]
        view = {key: params[key] for key in self.view_params}
        return [
            WorkUnit(
                index=index,
                data={**view, "y0": y0, "y1": y0 + min(band, height - y0)},
                memory_bytes=8 * 1024 * 1024 + min(band, height - y0) * width * 3,
                cost=min(band, height - y0) * self.row_cost(params),
            )
            for index, y0 in enumerate(range(0, height, band))
        ]

    def start(self, unit: WorkUnit) -> dict:
        return {**unit.data, "y": unit.data["y0"], "done": []}

    def step(self, state: dict) -> dict | Done:
        done = state["done"]
        done.append(self.render_row(state, state["y"]))  # the runtime never reuses a state it has stepped
        if state["y"] + 1 == state["y1"]:
            return Done({"y0": state["y0"], "rows": len(done), "pixels": b"".join(done)})
        return {**state, "y": state["y"] + 1, "done": done}

    def progress(self, state: dict) -> float:
        return (state["y"] - state["y0"]) / (state["y1"] - state["y0"])

    def combine(self, params: dict, results: list) -> Output:
        width, height = params["width"], params["height"]
        pixels = join_row_bands(results, width, height)
        return Output(encode_png(width, height, pixels), "image/png", f"{self.image_name}-{width}x{height}.png")


def join_row_bands(results: list, width: int, height: int) -> bytes:
    """Concatenate row bands in unit order, checking that they tile the image exactly."""
    pixels = bytearray()
    for index, result in enumerate(results):
        if not isinstance(result, dict) or not isinstance(result.get("pixels"), bytes):
            raise PluginError(f"result of unit {index} is not a band of pixels")
        if result.get("y0") != len(pixels) // (width * 3) or len(result["pixels"]) != result.get("rows", -1) * width * 3:
            raise PluginError(f"result of unit {index} does not continue the image where unit {index - 1} ended")
        pixels += result["pixels"]
    if len(pixels) != width * height * 3:
        raise PluginError(f"the results cover {len(pixels) // (width * 3)} of {height} rows")
    return bytes(pixels)


def check_plugin(plugin: object) -> Plugin:
    """Check the declarations of a loaded plugin object; PluginError says what is wrong."""
    if not isinstance(plugin, Plugin):
        raise PluginError(f"`plugin` is a {type(plugin).__name__}, not an instance of frost_core.plugin.api.Plugin "
                          "(nor of frost_core.plugin.gang.GangPlugin)")
    return check_declarations(plugin)


def check_declarations(plugin: Any) -> Any:
    """Check what a unit or gang plugin declares alike: name, version, description, params."""
    for attribute in ("name", "version"):
        value = getattr(plugin, attribute)
        if not isinstance(value, str) or not value.strip():
            raise PluginError(f"the plugin's {attribute} must be a non-empty string")
    if not isinstance(plugin.description, str):
        raise PluginError("the plugin's description must be a string")
    if not isinstance(plugin.params, tuple) or not all(isinstance(p, Param) for p in plugin.params):
        raise PluginError("the plugin's params must be a tuple of Param")
    names = [p.name for p in plugin.params]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PluginError(f"parameter {duplicates[0]!r} is declared twice")
    return plugin


class DeclaresParams(Protocol):
    """A Plugin, or the node's PluginInfo: both carry the name and the parameter declarations."""

    name: str
    params: tuple[Param, ...]


def parse_params(plugin: DeclaresParams, raw: Mapping[str, object]) -> dict:
    """Turn CLI strings (`K=V`) or typed UI values into checked parameters with defaults.

    The result has every declared parameter, in declaration order. Errors name the parameter.
    The node passes a PluginInfo here, so it checks parameters without importing the plugin.
    """
    declared = {p.name: p for p in plugin.params}
    for key in raw:
        if key not in declared:
            known = ", ".join(declared) or "none"
            raise PluginError(f"unknown parameter {key!r} for plugin {plugin.name!r} (known: {known})")
    parsed = {}
    for name, param in declared.items():
        value = _convert(param, raw[name]) if name in raw else param.default
        problem = param.check(value)
        if problem:
            raise PluginError(f"parameter {name!r}: {value!r} {problem}")
        parsed[name] = value
    return parsed


def split_names(text: str) -> list[str]:
    """The input file names an "inputs" parameter holds: "a.log, b.log" -> ["a.log", "b.log"]."""
    return [name.strip() for name in text.split(",") if name.strip()]


def declared_inputs(plugin: DeclaresParams, params: Mapping[str, object]) -> list[str]:
    """Every input file name the parsed `params` of `plugin` name through its "inputs" parameters."""
    return [name for p in plugin.params if p.kind == "inputs" for name in split_names(str(params[p.name]))]


def run_locally(
    plugin: Plugin, raw: Mapping[str, object] | None = None, *,
    inputs: Mapping[str, str | Path] | None = None, output_dir: str | Path | None = None,
) -> Output:
    """Run a whole assignment in this process, for plugin authors and tests.

    Each state crosses CBOR at every step, as at a migration point, so a plugin that keeps
    anything CBOR cannot carry fails here rather than on somebody else's machine. `inputs`
    maps input file names to paths here; each unit writes into a folder of its own, as on a
    node, and its output files land in `output_dir` when it completes (in unit order, so the
    higher unit index wins a name two units share, as at the master).
    """
    if not isinstance(plugin, Plugin):
        raise PluginError(f"run_locally runs a Plugin, not a {type(plugin).__name__} (a gang runs with run_gang_locally)")
    params = parse_params(plugin, raw or {})
    local_inputs = {check_file_name(name, "input file"): Path(path) for name, path in (inputs or {}).items()}
    results = []
    for unit in plugin.split(params):
        with tempfile.TemporaryDirectory(prefix="frost-unit-") as scratch, unit_files(LocalFiles(local_inputs, Path(scratch))):
            state = decode_plain(encode_plain(plugin.start(unit)))
            while not isinstance(state, Done):
                after = plugin.step(state)
                state = after if isinstance(after, Done) else decode_plain(encode_plain(after))
            results.append(decode_plain(encode_plain(state.result, "result", MAX_RESULT_BYTES), "result"))
            files = collect_outputs(Path(scratch))
        if files and output_dir is None:
            raise PluginError(f"unit {unit.index} wrote output files ({', '.join(files)}): give run_locally an output_dir")
        for name, data in files.items():
            Path(output_dir).mkdir(parents=True, exist_ok=True)
            Path(output_dir, name).write_bytes(data)
    return plugin.combine(params, results)


# --- files ------------------------------------------------------------------------------------


class UnitFiles(Protocol):
    """Where a running unit's input files come from and its output files go: the runtime's side."""

    output_dir: Path

    def open_input(self, name: str) -> BinaryIO: ...


_UNIT_FILES: ContextVar[UnitFiles | None] = ContextVar("frost_unit_files", default=None)


@contextlib.contextmanager
def unit_files(files: UnitFiles) -> Iterator[None]:
    """Give `open_input` and `output_path` their meaning while a unit runs (the guest, run_locally)."""
    token = _UNIT_FILES.set(files)
    try:
        yield
    finally:
        _UNIT_FILES.reset(token)


def open_input(name: str) -> BinaryIO:
    """Open one of the assignment's input files for reading: binary, read-only, seekable.

    The file stays on the assignment's master; the first open on a host fetches the whole
    file into that host's cache, later opens are local. Keep your file position in the state
    and `seek` to it in every step: after a move the unit reopens the file on another host.
    A name the assignment did not bring raises FileNotFoundError.
    """
    return _current_files().open_input(check_file_name(name, "input file"))


def output_path(name: str) -> Path:
    """Where output file `name` lives: in the unit's own folder, not shared with other units.

    Open, write and close it within one step: at each migration point the folder's files are
    packed into the checkpoint, restored wherever the unit resumes, and written back at the
    master when the unit completes (at most MAX_STATE_BYTES together).
    """
    return _current_files().output_dir / check_file_name(name, "output file")


def _current_files() -> UnitFiles:
    files = _UNIT_FILES.get()
    if files is None:
        raise PluginError("open_input and output_path work only while a unit runs (in start or step)")
    return files


@dataclasses.dataclass(frozen=True)
class LocalFiles:
    """Input files at paths on this machine: what `run_locally` gives a unit."""

    inputs: Mapping[str, Path]
    output_dir: Path

    def open_input(self, name: str) -> BinaryIO:
        path = self.inputs.get(name)
        if path is None:
            known = ", ".join(sorted(self.inputs)) or "none"
            raise FileNotFoundError(f"no input file named {name!r} (this assignment has: {known})")
        return open(path, "rb")


def collect_outputs(folder: Path, limit: int = MAX_STATE_BYTES) -> dict[str, bytes]:
    """The files a unit left in its output folder, by name; PluginError for what cannot travel.

    Only plain files with plain names travel, and all of them together must fit `limit`
    because they ride along with every checkpoint.
    """
    files: dict[str, bytes] = {}
    total = 0
    for entry in sorted(folder.iterdir()) if folder.exists() else ():
        check_file_name(entry.name, "output file")
        if entry.is_symlink() or not entry.is_file():
            raise PluginError(f"output {entry.name!r} is not a plain file; only plain files travel with a unit")
        total += entry.stat().st_size
        if total > limit:
            raise PluginError(f"the unit's output files are over {limit} bytes; they travel with every checkpoint")
        files[entry.name] = entry.read_bytes()
    return files



def encode_png(width: int, height: int, rgb: bytes) -> bytes:
    """Encode 8-bit RGB pixels (rows top to bottom) as a PNG, with the standard library only."""
    if width <= 0 or height <= 0 or len(rgb) != width * height * 3:
        raise PluginError(f"encode_png: {len(rgb)} bytes is not {width}x{height} RGB pixels")
    stride = width * 3
    raw = b"".join(b"\x00" + rgb[y * stride : (y + 1) * stride] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header) + _png_chunk(b"IDAT", zlib.compress(raw, 9)) + _png_chunk(b"IEND", b"")


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _has_kind(value: object, kind: str) -> bool:
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return _is_number(value)
    return isinstance(value, str)


def _convert(param: Param, value: object) -> object:
    """Parse a CLI string into the parameter's kind; typed values pass through (ints widen to float)."""
    if param.kind == "float" and _is_number(value):
        return float(value)  # type: ignore[arg-type]
    if not isinstance(value, str) or param.kind in ("str", "inputs"):
        return value
    text = value.strip()
    try:
        if param.kind == "int":
            return int(text, 10)
        if param.kind == "float":
            return float(text)
    except ValueError:
        raise PluginError(f"parameter {param.name!r} must be {KIND_WORDS[param.kind]}, not {value!r}") from None
    if text.lower() in _TRUE_WORDS:
        return True
    if text.lower() in _FALSE_WORDS:
        return False
    raise PluginError(f"parameter {param.name!r} must be true or false, not {value!r}")

