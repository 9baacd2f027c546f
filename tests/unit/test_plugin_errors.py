"""A plugin's error names the line of the author's own file, never where it was installed or copied."""

from __future__ import annotations


from frost_core.plugin.api import LocalFiles
from frost_core.plugin.loader import describe_exception

CODE = """
def step(files):
    return files.open_input("input")
"""


def test_the_error_points_into_the_plugin_file_not_into_frost_core_or_the_install_path(tmp_path):
    namespace: dict = {}
    exec(compile(CODE, "/usr/lib/python3/site-packages/frost_plugins/grep.py", "exec"), namespace)
    try:
        namespace["step"](LocalFiles({}, tmp_path))  # the innermost frame is frost_core's open_input
    except FileNotFoundError as error:
        described = describe_exception(error)
    assert described.endswith("(at grep.py:3)"), described
    assert "site-packages" not in described and "frost_core" not in described


def test_a_copy_the_node_keeps_is_named_as_the_author_named_it(tmp_path):
    copy = tmp_path / "fluid-0123456789ab.py"
    namespace: dict = {}
    exec(compile("def step(state):\n    return 1 / 0\n", str(copy), "exec"), namespace)
    try:
        namespace["step"](None)
    except ZeroDivisionError as error:
        assert describe_exception(error) == "ZeroDivisionError: division by zero (at fluid.py:2)"
