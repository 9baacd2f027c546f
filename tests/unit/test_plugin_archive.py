"""Plugin archives: packed as content_hash sees the code, unpacked only into plain files inside the target."""

import io
import os
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from frost_core.api.errors import PluginError
from frost_core.plugin.archive import MAX_ARCHIVE_BYTES, MAX_ARCHIVE_FILES, pack_plugin, read_archive, unpack_plugin
from frost_core.plugin.registry import content_hash
from frost_core.wire.codec import encode

from tests.plugin_sources import good_source, write


def archive_of(*files: tuple[str, bytes], format: int = 1) -> bytes:
    return encode({"format": format, "files": [[path, data] for path, data in files]})


def make_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "geometry"
    write(folder / "helper.py", "NAME = 'geometry'\n")
    write(folder / "shapes" / "__init__.py", "")
    write(folder / "__init__.py", "from .helper import NAME\n" + good_source().replace('name = "squares"', "name = NAME"))
    write(folder / "__pycache__" / "helper.cpython-311.pyc", "stale byte code")
    write(folder / "shapes" / "old.pyc", "stale byte code")
    return folder


def test_a_file_and_a_folder_unpack_to_the_same_content_hash(tmp_path):
    file = write(tmp_path / "src" / "squares.py", good_source())
    folder = make_folder(tmp_path / "src")
    for plugin in (file, folder):
        target = tmp_path / f"out-{plugin.name}"
        target.mkdir()
        unpacked = unpack_plugin(pack_plugin(plugin), target)
        assert unpacked == target / plugin.name
        assert content_hash(unpacked) == content_hash(plugin)
    assert not (tmp_path / "out-geometry" / "geometry" / "__pycache__").exists()
    assert sorted(path for path, _ in read_archive(pack_plugin(folder)).files) == [
        "geometry/__init__.py", "geometry/helper.py", "geometry/shapes/__init__.py",
    ]


def test_packing_is_deterministic(tmp_path):
    folder = make_folder(tmp_path)
    first = pack_plugin(folder)
    os.utime(folder / "helper.py", (1, 1))  # times and creation order are not part of the code
    (folder / "zzz.py").write_text("")
    (folder / "zzz.py").unlink()
    assert pack_plugin(folder) == first


def test_packing_refuses_links_that_could_leak_other_files(tmp_path):
    secret = write(tmp_path / "owner" / "secret.py", "PASSWORD = 'hunter2'\n")
    folder = make_folder(tmp_path)
    (folder / "leak.py").symlink_to(secret)
    with pytest.raises(PluginError, match="leak.py: is a symbolic link"):
        pack_plugin(folder)
    (folder / "leak.py").unlink()
    (folder / "sub").symlink_to(secret.parent, target_is_directory=True)
    with pytest.raises(PluginError, match="sub: is a symbolic link"):
        pack_plugin(folder)


def test_packing_refuses_what_is_not_a_plugin_or_too_big(tmp_path):
    with pytest.raises(PluginError, match="not a plugin file"):
        pack_plugin(write(tmp_path / "notes.txt", "hi"))
    with pytest.raises(PluginError, match="without an __init__.py"):
        pack_plugin(write(tmp_path / "loose" / "helper.py", "").parent)
    big = write(tmp_path / "big" / "__init__.py", "")
    (big.parent / "blob.py").write_bytes(b"#" * (MAX_ARCHIVE_BYTES + 1))
    with pytest.raises(PluginError, match="too big to ship"):
        pack_plugin(big.parent)


GOOD = b"plugin = None\n"


def tar_with_a_link() -> bytes:
    """What a tar-based format would have to defend against; ours does not even parse it."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        link = tarfile.TarInfo("p/__init__.py")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    return out.getvalue()


# archive -> words the refusal must contain
MALICIOUS = {
    "parent": (archive_of(("p/__init__.py", GOOD), ("p/../../evil.py", GOOD)), "'..'"),
    "parent_top": (archive_of(("../evil.py", GOOD),), "'..'"),
    "absolute": (archive_of(("/etc/cron.d/evil", GOOD),), "absolute path"),
    "empty_part": (archive_of(("p//__init__.py", GOOD),), "empty"),
    "dot": (archive_of(("./p.py", GOOD),), "'.'"),
    "backslash": (archive_of(("p\\..\\evil.py", GOOD),), "backslash"),
    "nul": (archive_of(("p.py\0.txt", GOOD),), "NUL"),
    "duplicate": (archive_of(("p/__init__.py", GOOD), ("p/__init__.py", b"other")), "twice"),
    "file_and_folder": (archive_of(("p/__init__.py", GOOD), ("p/x", GOOD), ("p/x/y.py", GOOD)), "both a file and a folder"),
    "byte_code": (archive_of(("p/__init__.py", GOOD), ("p/__pycache__/__init__.cpython-311.pyc", b"code")), "byte-code cache"),
    "pyc": (archive_of(("p/__init__.py", GOOD), ("p/helper.pyc", b"code")), "byte-code cache"),
    "two_roots": (archive_of(("a.py", GOOD), ("b.py", GOOD)), "2 top-level names"),
    "not_py": (archive_of(("evil.sh", GOOD),), "not a .py file"),
    "no_init": (archive_of(("p/helper.py", GOOD),), "without an __init__.py"),
    "long_name": (archive_of(("p" * 300 + ".py", GOOD),), "longer than 255 bytes"),
    "empty": (archive_of(), "no files"),
    "too_many": (archive_of(*((f"p/m{i}.py", b"") for i in range(MAX_ARCHIVE_FILES + 1))), "over the limit"),
    "too_big": (archive_of(("p.py", bytes(MAX_ARCHIVE_BYTES)),), "over the limit"),
    "future_format": (archive_of(("p.py", GOOD), format=2), "format 2"),
    "not_pairs": (encode({"format": 1, "files": [["p.py", "text, not bytes"]]}), "[path, bytes] pair"),
    "not_a_map": (encode(["p.py", GOOD]), "not a map"),
    "not_cbor": (b"\x1f\x8b\x08\x00 a tar.gz, say", "not valid"),
    "symlink_tar": (tar_with_a_link(), "not valid"),
}


@pytest.mark.parametrize("case", sorted(MALICIOUS))
def test_malicious_archives_are_refused_before_anything_is_written(tmp_path, case):
    archive, words = MALICIOUS[case]
    target = tmp_path / "target"
    target.mkdir()
    with pytest.raises(PluginError, match="the plugin archive") as caught:
        unpack_plugin(archive, target)
    assert words in caught.value.message
    assert list(target.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_any_bytes_unpack_or_raise_plugin_error(data):
    with tempfile.TemporaryDirectory() as folder:
        try:
            unpack_plugin(data, Path(folder))
        except PluginError:
            pass


_HOSTILE_PARTS = st.sampled_from(["p", "q.py", "__init__.py", "..", ".", "", "__pycache__", "x.pyc", "sub", "/", "a\\b"])
_HOSTILE = st.lists(st.tuples(st.lists(_HOSTILE_PARTS, min_size=1, max_size=4).map("/".join), st.binary(max_size=16)), max_size=6)
_PLAIN_PATHS = st.lists(st.sampled_from(["m.py", "sub", "n.py", "data.bin"]), min_size=1, max_size=3).map(
    lambda parts: "/".join(["p", *parts])
)
_PLAUSIBLE = st.lists(st.tuples(_PLAIN_PATHS, st.binary(max_size=16)), max_size=5, unique_by=lambda entry: entry[0]).map(
    lambda entries: [("p/__init__.py", b""), *entries]  # a package, so that more checks than the first get exercised
)
_ENTRIES = st.one_of(_HOSTILE, _PLAUSIBLE)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_ENTRIES)
def test_well_formed_archives_with_hostile_paths_stay_inside_the_target(entries):
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "target"
        target.mkdir()
        try:
            plugin = unpack_plugin(archive_of(*entries), target)
        except PluginError:
            assert sorted(Path(folder).rglob("*")) == [target] and list(target.iterdir()) == []
            return
        written = sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file())
        assert written == sorted(path for path, _ in entries)
        assert sorted(p.name for p in Path(folder).iterdir()) == ["target"]
        assert plugin.parent == target
        assert pack_plugin(plugin) == archive_of(*sorted(entries))  # unpacking then packing changes nothing
