"""The gang worked example in docs/plugins.md works as printed, whatever p and checkpoints."""

import re
import sys
from pathlib import Path

import pytest

from frost_core.plugin.gang import run_gang_locally
from frost_core.plugin.loader import load_plugin_file

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"


@pytest.fixture
def oddeven(tmp_path):
    found = re.search(r"<!-- example: oddeven.py -->\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert found, "docs/plugins.md lost its gang example oddeven.py"
    (tmp_path / "oddeven.py").write_text(found.group(1))
    return load_plugin_file(tmp_path / "oddeven.py")


def test_the_example_prints_what_the_doc_shows(oddeven):
    out = run_gang_locally(oddeven, {"count": "1000", "members": "4"})
    assert f"{out.filename} {out.data.decode().splitlines()[0]}" in DOC.read_text()


@pytest.mark.parametrize("members", [1, 2, 3, 5])
def test_the_example_sorts_for_any_member_count_with_or_without_checkpoints(oddeven, members):
    expected = sorted(sys.modules[type(oddeven).__module__].numbers(7, 0, 50))
    for checkpoint_every in (1, None):
        out = run_gang_locally(oddeven, {"count": "50", "members": str(members)}, checkpoint_every=checkpoint_every)
        assert [int(n) for n in out.data.decode().splitlines()[1:]] == expected
