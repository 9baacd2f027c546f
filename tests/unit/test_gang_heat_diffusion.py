"""The bundled heat-diffusion gang equals a plain single-process Jacobi solver bit for bit, whatever p and checkpoints."""

import struct

import pytest

from frost_core.api.errors import PluginError
from frost_core.plugin.gang import run_gang_locally
from frost_plugins.heat_diffusion import plugin as heat


def reference(height, width, iterations, tolerance):
    """The plate after the iterations, written independently of the plugin: lists of lists, one process."""
    plate = [[65535 if y == 0 else 0 for _ in range(width)] for y in range(height)]
    done = 0
    while done < iterations:
        new = [row[:] for row in plate]
        for y in range(1, height - 1):
            for x in range(1, width - 1):
                new[y][x] = (plate[y - 1][x] + plate[y + 1][x] + plate[y][x - 1] + plate[y][x + 1] + 2) // 4
        change = max(abs(new[y][x] - plate[y][x]) for y in range(height) for x in range(width))
        plate, done = new, done + 1
        if change <= tolerance:
            break
    cells = [cell for row in plate for cell in row]
    header = f"P5\n# heat diffusion: {done} iterations\n{width} {height}\n65535\n".encode()
    return header + struct.pack(f">{len(cells)}H", *cells), done


@pytest.mark.parametrize("members", [1, 2, 3, 4])
@pytest.mark.parametrize("checkpoint_every", [1, None])
def test_a_fixed_number_of_iterations_matches_the_reference(members, checkpoint_every):
    expected, _ = reference(11, 9, 25, 0)
    params = {"height": "11", "width": "9", "iterations": "25", "members": str(members)}
    output = run_gang_locally(heat, params, checkpoint_every=checkpoint_every)
    assert output.data == expected
    assert (output.filename, output.media_type) == ("heat-9x11.pgm", "image/x-portable-graymap")


@pytest.mark.parametrize("members", [1, 2, 3, 4])
@pytest.mark.parametrize("checkpoint_every", [1, 3, None])
def test_stopping_at_a_tolerance_all_members_agree_on_the_same_iteration(members, checkpoint_every):
    expected, done = reference(10, 12, 400, 40)
    assert 1 < done < 400  # the tolerance, not the iteration count, ends this run
    params = {"height": "10", "width": "12", "iterations": "400", "tolerance": "40", "members": str(members)}
    assert run_gang_locally(heat, params, checkpoint_every=checkpoint_every).data == expected


def test_no_iterations_gives_the_initial_plate():
    assert run_gang_locally(heat, {"height": "4", "width": "3", "iterations": "0", "members": "4"}).data == reference(4, 3, 0, 0)[0]


@pytest.mark.parametrize(("params", "words"), [
    ({"height": "4", "members": "5"}, "members 5 is more than the plate's 4 rows: each member needs a strip of at least one row"),
    ({"height": "4096", "width": "4096", "members": "4"}, "a strip of 4194304 cells is more than one superstep should compute (at most 500000)"),
    ({"width": "2"}, "parameter 'width': 2 is below the minimum 3"),
])
def test_parameters_out_of_bounds_are_refused_with_a_helpful_error(params, words):
    with pytest.raises(PluginError) as caught:
        run_gang_locally(heat, params)
    assert words in caught.value.message
