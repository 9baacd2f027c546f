"""The UI's kept choices: what a run left is what the next one starts with, and a file it cannot read costs
only the choices, never the start."""

import json
import logging

import pytest

from frost_tui.ui_choices import UiChoices


def test_choices_saved_are_the_choices_loaded(tmp_path):
    path = tmp_path / "ui.json"
    UiChoices(peers_sort="RTT", peers_descending=False).save(path)
    assert UiChoices.load(path) == UiChoices(peers_sort="RTT", peers_descending=False)
    assert [p.name for p in tmp_path.iterdir()] == ["ui.json"]   # no temp file left beside it


def test_no_file_and_no_place_give_the_defaults(tmp_path):
    assert UiChoices.load(tmp_path / "ui.json") == UiChoices() == UiChoices.load(None)
    UiChoices(peers_sort="RTT").save(None)   # an app with nowhere to keep them: nothing written, no error


def test_a_choice_the_file_does_not_name_keeps_its_default_and_unknown_names_are_ignored(tmp_path):
    path = tmp_path / "ui.json"
    path.write_text(json.dumps({"peers_sort": "CPUs", "columns": ["Name"]}))
    assert UiChoices.load(path) == UiChoices(peers_sort="CPUs", peers_descending=True)


@pytest.mark.parametrize("text", ['{"peers_sort": "Name"', '["Name"]', '{"peers_descending": "yes"}',
                                  '{"peers_sort": 3}', "\udcff"])
def test_a_file_that_does_not_hold_choices_gives_the_defaults_and_says_so_in_the_log(tmp_path, caplog, text):
    path = tmp_path / "ui.json"
    path.write_text(text, errors="surrogateescape")
    with caplog.at_level(logging.WARNING, logger="frost.tui"):
        assert UiChoices.load(path) == UiChoices()
    assert str(path) in caplog.text


def test_a_folder_it_cannot_write_keeps_the_choice_for_this_run_only(tmp_path, caplog):
    missing = tmp_path / "gone" / "ui.json"
    with caplog.at_level(logging.WARNING, logger="frost.tui"):
        UiChoices(peers_sort="RTT").save(missing)
    assert "not written" in caplog.text and not missing.parent.exists()


def test_hidden_columns_that_are_not_lists_of_titles_give_the_defaults(tmp_path):
    path = tmp_path / "ui.json"
    path.write_text('{"hidden_columns": {"peers-table": "Address"}}')
    assert UiChoices.load(path) == UiChoices()
    path.write_text('{"hidden_columns": {"peers-table": ["Address"]}}')
    assert UiChoices.load(path).hidden_columns == {"peers-table": ["Address"]}
