"""The CLI contract scripts rely on (docs/cli.md): every `--json` document fits the schema, every exit code happens."""

import json
import os
import signal
import subprocess
from pathlib import Path

import jsonschema
import pytest

from frost_core import ClusterKey
from frost_tui.cli_docs import MAN_PAGE, SCHEMA_FILE, json_schema, man_page
from tests.nodes import FROST_TUI
from tests.plugin_sources import good_source, write
from tests.waiting import wait_for

SCHEMA = json.loads(SCHEMA_FILE.read_text())


def _run(*args, env=None, **kwargs):
    return subprocess.run([FROST_TUI, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, **kwargs)


def _document(done, command: str, *, ok: bool = True):
    """The one JSON document a command printed, checked against docs/cli.schema.json."""
    document = json.loads(done.stdout)
    jsonschema.validate(document, SCHEMA)
    assert (document["command"], document["ok"]) == (command, ok), done.stderr
    return document["result"]


def _error(done, code: int):
    """The JSON error on stderr, checked against the schema; stdout stays empty."""
    assert done.returncode == code, (done.stdout, done.stderr)
    assert done.stdout == ""
    error = json.loads(done.stderr)
    jsonschema.validate(error, SCHEMA)
    assert error["exit_code"] == code and not error["ok"]
    return error["error"]


def test_the_schema_file_and_the_man_page_are_up_to_date():
    assert SCHEMA == json_schema(), "run `python -m frost_tui.cli_docs`"
    assert MAN_PAGE.read_text() == man_page(), "run `python -m frost_tui.cli_docs`"


def test_queries_print_documents_that_fit_the_schema(single_node):
    node = single_node()
    status = _document(node.cli("status", "--json"), "status")
    assert status["state"] in ("idle", "hosting", "owner-active", "held") and status["address"]  # other work may be busy
    assert [p["is_self"] for p in _document(node.cli("peers", "--json"), "peers")] == [True]
    plugins = _document(node.cli("plugins", "--json"), "plugins")
    assert {"mandelbrot", "montecarlo-pi"} <= {p["name"] for p in plugins}


def test_assignment_commands_print_documents_that_fit_the_schema(single_node, tmp_path):
    # The assignment must finish even while other tests load this machine: the owner policy stands aside.
    node = single_node('\n[owner]\npolicy = "always"\n')
    output = tmp_path / "pi.json"
    # Parameters as K=V words or with --param, anywhere among the options (units=1 comes after --wait).
    submitted = _document(node.cli("submit", "montecarlo-pi", "samples=1000", "--wait", "units=1",
                                   "--output", str(output), "--json"), "submit")
    assert submitted["assignment"]["state"] == "done" and submitted["saved"]["path"] == str(output)
    assert [a["id"] for a in _document(node.cli("assignments", "--json"), "assignments")] == [submitted["id"]]
    units = _document(node.cli("units", submitted["id"], "--json"), "units")
    assert [u["task_id"] for u in units["units"]] == [f"{submitted['id']}.0"] and units["matched"] == 1
    assert _document(node.cli("units", submitted["id"], "queued", "--json"), "units") == {
        "units": [], "matched": 0, "unit_count": 1}
    assert node.cli("units", submitted["id"], "0").stdout.splitlines()[-1] == "1 of 1 units matches '0'"
    again = _document(node.cli("result", submitted["id"], "--output", str(tmp_path / "again.json"), "--json"),
                      "result")
    assert again["bytes"] == output.stat().st_size and again["named"].endswith(".json")
    # A name that promises another format: the plugin's bytes as they are, and a note that says so.
    renamed = node.cli("result", submitted["id"], "--output", str(tmp_path / "pi.txt"))
    assert (tmp_path / "pi.txt").read_bytes() == output.read_bytes()
    assert "holds those bytes unchanged, so name it .json to open it as what it is" in renamed.stderr
    assert "Note" not in node.cli("result", submitted["id"], "--output", str(tmp_path / "pi.JSON")).stderr
    # No --output: the plugin's file name in the current folder, never over a file there; a folder: that name in it.
    here = tmp_path / "here"
    here.mkdir()
    node.cli("result", submitted["id"], cwd=here)
    named = here / again["named"]
    assert named.read_bytes() == output.read_bytes()
    named.write_text("an earlier result")
    refused = _error(node.cli("result", submitted["id"], "--json", cwd=here, check=False), 1)
    assert refused["title"] == "Not overwritten" and str(named) in refused["message"]
    assert named.read_text() == "an earlier result"
    folder = tmp_path / "folder"
    folder.mkdir()
    node.cli("result", submitted["id"], "-o", str(folder))
    assert (folder / again["named"]).read_bytes() == output.read_bytes()
    # The unit ran here for this node's own assignment: the ledger counts it as given and as received.
    ledger = _document(node.cli("stats", "--since", "1h", "--json"), "stats")
    assert ledger["given"] > 0 and ledger["received"] > 0 and ledger["days"][-1]["given"] == ledger["given"]
    wiki = tmp_path / "ledger.csv"
    printed = node.cli("stats", "--format", "csv", "--csv", str(wiki)).stdout
    assert printed.splitlines()[0] == "section,key,name,given_cpu_seconds,received_cpu_seconds"
    assert wiki.read_text().splitlines()[:2] == printed.splitlines()[:2] and printed.splitlines()[1].startswith("day,")
    endless = _document(node.cli("submit", "montecarlo-pi", "--param", "samples=1000000000000", "--param",
                                 "units=1", "--json"), "submit")
    assert endless["assignment"] is None
    assert _document(node.cli("cancel", endless["id"], "--json"), "cancel") == endless["id"]


def test_owner_commands_print_a_document_that_fits_the_schema(single_node):
    node = single_node()
    assert "pause" in _document(node.cli("pause", "--until", "23:59", "--json"), "pause")
    _document(node.cli("resume", "--json"), "resume")
    _document(node.cli("finish", "--json"), "finish")
    assert _document(node.cli("evict", "--json"), "evict") == "evicted 0 guests"
    key_file = str(node.data_dir.parent / "cluster.key")  # where the single_node fixture keeps it
    joined = _document(node.cli("key", "show", "--cluster-key-file", key_file, "--json"), "key show")
    assert joined["join_code"].startswith("FROST")
    config = _document(node.cli("config", "--json"), "config")
    assert config["values"]["gossip.interval"] == 0.3 and config["config_file_exists"]


def test_measure_prints_a_document_that_fits_the_schema(single_node):
    measured = _document(single_node().cli("measure", "--json"), "measure")
    assert measured["speed"] > 0 and measured["cpus"] >= 1


def test_commands_without_a_node_print_documents_that_fit_the_schema(tmp_path):
    script = _document(_run("completion", "bash", "--json"), "completion")
    assert "frost-tui" in script
    code = ClusterKey.generate().to_join_code()
    saved = _document(_run("key", "set", code, "--data-dir", str(tmp_path), "--json"), "key set")
    assert ClusterKey.load(Path(saved["key_file"])).to_join_code() == code
    assert _document(_run("key", "owner-token", "--data-dir", str(tmp_path), "--json"), "key owner-token")
    broken = tmp_path / "broken_plugin.py"
    broken.write_text("plugin = object()\n")
    added = _run("plugins", "add", str(broken), "--data-dir", str(tmp_path), "--json")
    assert added.returncode == 1 and not _document(added, "plugins add", ok=False)[0]["ok"]
    assert _document(_run("plugins", "remove", "broken_plugin", "--data-dir", str(tmp_path), "--json"),
                     "plugins remove") == "removed broken_plugin"
    plugins = _document(_run("plugins", "--json", "--data-dir", str(tmp_path)), "plugins")
    assert "broken_plugin" not in {p["name"] for p in plugins}  # it no longer warns
    assert _error(_run("plugins", "remove", "grep", "--data-dir", str(tmp_path), "--json"), 1)["title"] == "Plugin error"
    shown = _document(_run("plugins", "show", "montecarlo-pi", "--data-dir", str(tmp_path), "--json"), "plugins show")
    assert [p["name"] for p in shown["params"]] == ["samples", "units", "seed"]
    assert _error(_run("plugins", "show", "montecarlo", "--data-dir", str(tmp_path), "--json"), 1) == {
        "title": "No such plugin", "message": "no plugin named 'montecarlo' (plugins here: grep, heat-diffusion, "
                                              "mandelbrot, montecarlo-pi, raytrace)"}
    text = _run("plugins", "show", "montecarlo-pi", "--data-dir", str(tmp_path)).stdout
    assert "units      int   16        1 to 100000" in text, text     # what `submit --param units=` accepts
    # An owner's own grep outranks the bundled one: `show` describes the code `submit grep` runs.
    mine = _document(_run("plugins", "add", str(write(tmp_path / "my_grep.py", good_source(name="grep", version="9"))),
                          "--data-dir", str(tmp_path), "--json"), "plugins add")[0]
    assert _document(_run("plugins", "show", "grep", "--data-dir", str(tmp_path), "--json"),
                     "plugins show")["hash"] == mine["hash"]
    assert f"ok, superseded by {mine['hash'][:12]}" in _run("plugins", "--data-dir", str(tmp_path)).stdout
    code = "FROST-AAAA"  # only its shape matters here: a bad code is refused with exit 2
    assert _error(_run("key", "set", code, "--data-dir", str(tmp_path), "--json"), 2)["title"] == "Bad join code"
    assert _document(_run("plugins", "--json", "--data-dir", str(tmp_path)), "plugins")


def test_refused_is_1_with_the_nodes_reason(single_node):
    node = single_node()
    assert _error(node.cli("evict", "nosuch", "--json", check=False), 1)["title"] == "No such guest"
    refused = node.cli("evict", "nosuch", check=False)
    assert refused.returncode == 1 and "no guest nosuch runs here" in refused.stderr and refused.stdout == ""
    _error(node.cli("cancel", "a999", "--json", check=False), 1)


def test_usage_and_configuration_errors_are_2_and_create_nothing(tmp_path):
    typo = tmp_path / "typo"
    assert _error(_run("key", "show", "--data-dir", str(typo), "--json"), 2)["message"].startswith("--data-dir")
    assert not typo.exists(), "key show must never make a key (a typo would start a new cluster)"
    plain = _run("key", "show", "--data-dir", str(typo))
    assert plain.returncode == 2 and "no such directory" in plain.stderr and "Traceback" not in plain.stderr
    missing = tmp_path / "missing.toml"
    assert "no such file" in _error(_run("--config", str(missing), "status", "--json"), 2)["message"]
    assert _run("--config", str(missing), "--headless").returncode == 2
    assert _error(_run("status", "--frobnicate", "--json"), 2)["title"] == "Usage"
    assert _error(_run("status", "units=8", "--json"), 2)["message"].startswith("unrecognized arguments: units=8")
    assert "a plugin parameter is K=V" in _error(_run("submit", "mandelbrot", "width", "--json"), 2)["message"]
    since = _run("stats", "--since", "yesterday", "--data-dir", str(tmp_path))
    assert since.returncode == 2 and "--since 'yesterday': expected a positive duration" in since.stderr
    history = _run("screenshots", "--live", "--history", "0", "--out", str(tmp_path / "shots"))
    assert history.returncode == 2 and "--history 0: " in history.stderr and not (tmp_path / "shots").exists()
    assert _run("nosuchcommand").returncode == 2


def test_no_node_running_is_3(tmp_path):
    error = _error(_run("status", "--data-dir", str(tmp_path), "--json"), 3)
    assert "no node is running" in error["message"]
    assert _run("pause", "--data-dir", str(tmp_path)).returncode == 3


def test_screenshots_without_their_extra_say_what_to_install(tmp_path):
    blocker = tmp_path / "blocked" / "cairosvg"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('No module named cairosvg')\n")
    done = _run("screenshots", "--out", str(tmp_path / "shots"), env={"PYTHONPATH": str(blocker.parent)})
    assert done.returncode == 2 and "pip install 'frost-tui[screenshots]'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "shots").exists()


def test_a_reader_that_goes_away_is_141_without_a_traceback():
    read_end, write_end = os.pipe()
    os.close(read_end)  # `frost-tui config | head` once head has its lines: every write meets a closed pipe
    try:
        writer = subprocess.run([FROST_TUI, "config"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert writer.returncode == 141 and writer.stderr == ""


def test_interrupted_is_130(single_node, tmp_path):
    node = single_node()
    waiting = subprocess.Popen([FROST_TUI, "submit", "montecarlo-pi", "--param", "samples=1000000000000",
                                "--param", "units=1", "--wait", "--data-dir", str(node.data_dir),
                                "--config", str(node.data_dir / "config.toml")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with waiting:
        wait_for(lambda: node.call("assignments"), timeout=30, what="the assignment to be submitted")
        waiting.send_signal(signal.SIGINT)
        _, stderr = waiting.communicate(timeout=30)
    assert waiting.returncode == 130 and "Traceback" not in stderr


def test_version_prints_the_installed_version():
    from importlib.metadata import version

    done = _run("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"frost-tui {version('frost-tui')}")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts_name_the_commands(shell):
    done = _run("completion", shell)
    assert done.returncode == 0 and "submit" in done.stdout and "--data-dir" in done.stdout


def test_the_bash_completion_script_is_valid_bash(tmp_path):
    script = tmp_path / "frost-tui.bash"
    script.write_text(_run("completion", "bash").stdout)
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True, timeout=30).returncode == 0


def test_config_set_changes_the_running_node_at_once_and_says_what_waits_for_a_restart(single_node):
    node = single_node()
    config_file = node.data_dir / "config.toml"
    applied = node.cli("config", "set", "guests.cpu_cap_in_use_percent=25", "node.port=47799")
    assert "The running node applies the others now; node.port takes effect when the node starts again." \
        in applied.stdout
    wait_for(lambda: "guests together use at most 25 % of one core" in " ".join(node.call("status")["hosting"]["owner"]),
             timeout=10, what="the cap in force on the running node")
    saved = config_file.read_text()
    assert "cpu_cap_in_use_percent = 25" in saved and "port = 47799" in saved
    refused = node.cli("config", "set", "guests.cpus=2", "owner.policy=sometimes", check=False)
    assert refused.returncode == 2 and "owner.policy must be one of share, idle-only, always" in refused.stderr
    assert config_file.read_text() == saved, "a refused value must leave the file (and the other value) alone"
    node.stop()
    offline = node.cli("config", "set", "owner.policy=idle-only", "guests.warm_spare=off", "--json")
    document = _document(offline, "config set")
    assert document == {"config_file": str(config_file), "values": {"owner.policy": "idle-only",
                        "guests.warm_spare": False}, "applied": False, "waiting_for_restart": ""}
    assert 'policy = "idle-only"' in config_file.read_text() and "cpu_cap_in_use_percent = 25" in config_file.read_text()
