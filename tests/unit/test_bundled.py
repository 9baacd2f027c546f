"""The bundled plugins give known answers, bit-identical whatever happens to their units."""

import hashlib
import json
import math
import random

import pytest

from frost_core.api.errors import PluginError
from frost_core.plugin.api import MAX_RESULT_BYTES, Done, Output, Plugin, decode_plain, encode_plain, parse_params, run_locally
from frost_plugins import mandelbrot, montecarlo_pi, raytrace

from tests.png_reader import read_png

# Small fixed sizes so each reference run takes well under a second. The digests are of the
# decoded pixels: PNG bytes also depend on the zlib build, pixels only on our arithmetic.
MANDELBROT = {"width": 48, "height": 32, "max_iter": 64, "rows_per_unit": 5}
MANDELBROT_PIXELS = "fcd27244c414ad789d3d1fb2330a0d5409533cc6b90cf3f31d2604bb0a756ad5"
RAYTRACE = {"width": 40, "height": 30, "rows_per_unit": 4, "samples": 2}
RAYTRACE_PIXELS = "534e7e29fe910ca8bcb0cbeec1833351709429041fdcd718011bc3485ddb89c7"
PI = {"samples": 200_000, "units": 7}
PI_HITS = 156_635  # for the default seed


def run_with_chaos(plugin: Plugin, raw: dict, rng: random.Random) -> Output:
    """Run an assignment the hard way: units in random order, every state through CBOR
    (a migration point), checkpoints now and then, kills that resume from the last checkpoint
    and restarts from scratch, results decoded as the master would store them."""
    params = parse_params(plugin, raw)
    units = [type(u).from_plain(decode_plain(encode_plain(u.to_plain()))) for u in plugin.split(params)]
    results = {}
    for unit in rng.sample(units, len(units)):
        checkpoint = encode_plain(plugin.start(unit))
        state = decode_plain(checkpoint)
        while True:
            after = plugin.step(state)
            if isinstance(after, Done):
                results[unit.index] = decode_plain(encode_plain(after.result, "result", MAX_RESULT_BYTES))
                break
            blob = encode_plain(after)
            roll = rng.random()
            if roll < 0.25:
                checkpoint = blob  # a checkpoint is taken
            if roll > 0.9:
                state = decode_plain(checkpoint)  # killed: resume from the last checkpoint
            elif roll > 0.85:
                checkpoint = encode_plain(plugin.start(unit))  # checkpoint lost: start over
                state = decode_plain(checkpoint)
            else:
                state = decode_plain(blob)  # migrated (or just went on) from this state
    return plugin.combine(params, [results[i] for i in range(len(units))])


def pixel_digest(output: Output) -> str:
    return hashlib.sha256(read_png(output.data)[2]).hexdigest()


def test_mandelbrot_reference_image():
    output = run_locally(mandelbrot.plugin, MANDELBROT)
    assert (output.media_type, output.filename) == ("image/png", "mandelbrot-48x32.png")
    assert read_png(output.data)[:2] == (48, 32)
    assert pixel_digest(output) == MANDELBROT_PIXELS


def test_raytrace_reference_image():
    output = run_locally(raytrace.plugin, RAYTRACE)
    assert (output.media_type, output.filename) == ("image/png", "raytrace-40x30.png")
    assert pixel_digest(output) == RAYTRACE_PIXELS


def test_raytrace_image_shows_the_scene():
    """Sky at the top, a darker shadowed floor below, and a bright sphere's highlight somewhere."""
    width, height, pixels = read_png(run_locally(raytrace.plugin, RAYTRACE).data)
    top_left = pixels[0:3]
    assert top_left[2] == 255 and top_left[0] < top_left[2]  # blue sky
    assert max(pixels) == 255 and min(pixels) < 40  # highlights and shadows


def test_pi_estimate_is_within_bounds():
    report = json.loads(run_locally(montecarlo_pi.plugin, PI).data)
    assert report["samples"] == 200_000 and report["hits"] == PI_HITS
    sigma = 4 * math.sqrt(math.pi / 4 * (1 - math.pi / 4) / 200_000)
    assert abs(report["pi"] - math.pi) < 5 * sigma
    assert report["standard_error"] == pytest.approx(sigma, rel=0.01)


@pytest.mark.parametrize("units", [1, 3, 64])
def test_pi_does_not_depend_on_how_samples_are_cut(units):
    report = json.loads(run_locally(montecarlo_pi.plugin, {**PI, "units": units}).data)
    assert report["hits"] == PI_HITS


def test_pi_seed_changes_the_samples():
    report = json.loads(run_locally(montecarlo_pi.plugin, {**PI, "seed": 7}).data)
    assert report["hits"] != PI_HITS


@pytest.mark.parametrize(
    ("plugin", "params"),
    [
        (mandelbrot.plugin, MANDELBROT),
        (raytrace.plugin, {**RAYTRACE, "samples": 1}),
        (montecarlo_pi.plugin, {"samples": 90_000, "units": 4}),
    ],
    ids=["mandelbrot", "raytrace", "montecarlo-pi"],
)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_output_is_bit_identical_after_kills_restarts_and_migrations(plugin, params, seed):
    assert run_with_chaos(plugin, params, random.Random(seed)).data == run_locally(plugin, params).data


@pytest.mark.parametrize("plugin", [mandelbrot.plugin, raytrace.plugin, montecarlo_pi.plugin], ids=lambda p: p.name)
def test_progress_rises_from_zero_to_below_one(plugin):
    params = parse_params(plugin, {"samples": 50_000} if plugin is montecarlo_pi.plugin else {"width": 16, "height": 8})
    state = plugin.start(plugin.split(params)[0])
    seen = [plugin.progress(state)]
    while not isinstance(state := plugin.step(state), Done):
        seen.append(plugin.progress(state))
    assert seen[0] == 0.0 and seen == sorted(seen) and all(0.0 <= p < 1.0 for p in seen)


@pytest.mark.parametrize("plugin", [mandelbrot.plugin, raytrace.plugin], ids=lambda p: p.name)
def test_image_combine_refuses_missing_bands(plugin):
    params = parse_params(plugin, {"width": 8, "height": 8, "rows_per_unit": 2})
    results = []
    for unit in plugin.split(params):
        state = plugin.start(unit)
        while not isinstance(state, Done):
            state = plugin.step(state)
        results.append(state.result)
    with pytest.raises(PluginError, match="result of unit 1 does not continue"):
        plugin.combine(params, results[:1] + results[2:])
    with pytest.raises(PluginError, match="cover 6 of 8 rows"):
        plugin.combine(params, results[:-1])


def test_pi_combine_refuses_missing_units():
    params = parse_params(montecarlo_pi.plugin, {"samples": 100, "units": 2})
    with pytest.raises(PluginError, match="cover 50 of 100 samples"):
        montecarlo_pi.plugin.combine(params, [{"hits": 40, "samples": 50}])


@pytest.mark.parametrize("plugin", [mandelbrot.plugin, raytrace.plugin, montecarlo_pi.plugin], ids=lambda p: p.name)
def test_default_units_declare_memory_and_cost(plugin):
    units = plugin.split(parse_params(plugin, {}))
    assert len(units) > 1
    assert all(u.memory_bytes >= 1024 * 1024 and u.cost > 0 for u in units)
    assert all(len(encode_plain(plugin.start(u))) < 64 * 1024 for u in units)  # states start small


# Hashes taken with the plugins as they were before RowBands (commit 8d4ddec): the units, every
# unit's result and the PNG must stay the same bytes, so old checkpoints and results still fit.
BEFORE_ROW_BANDS = {
    "mandelbrot": ({"width": 37, "height": 29, "rows_per_unit": 6, "max_iter": 60},
                   "30b942d6985f3f5f859c2a8179dddfb747522957c337435cbf8eb87b5075603f",
                   "f6b2ba41210bd0cab625d3c68f6ce79413e3f9a1d16359abad9909b1bbaf6087",
                   "090203ae0ac0fa7bbedad7f8ab61ce4f2c16722473b264d99868ac9ae1fb7a07"),
    "raytrace": ({"width": 23, "height": 17, "rows_per_unit": 5},
                 "f79748c44d547d007e824de58ea1822489b5734cfaf5706665cacd81c5c383c5",
                 "52cf6c7118bccc31256cce8f2a8d390248894d36c07ea33140865514e6208c27",
                 "921449162742ebd55f76926bba2fc25483103ea98532e4b3eafcc2ca7b86ce31"),
}


@pytest.mark.parametrize("plugin", [mandelbrot.plugin, raytrace.plugin], ids=["mandelbrot", "raytrace"])
def test_units_and_results_are_the_same_bytes_as_before_row_bands(plugin):
    overrides, units_sha, results_sha, png_sha = BEFORE_ROW_BANDS[plugin.name]
    params = {p.name: p.default for p in plugin.params} | overrides
    units = plugin.split(params)
    results = []
    for unit in units:
        state = plugin.start(unit)
        while not isinstance(state, Done):
            state = plugin.step(decode_plain(encode_plain(state)))  # as after a checkpoint at every step
        results.append(state.result)
    encoded_units = b"".join(encode_plain({"i": u.index, "d": u.data, "m": u.memory_bytes, "c": u.cost}) for u in units)
    assert hashlib.sha256(encoded_units).hexdigest() == units_sha
    assert hashlib.sha256(b"".join(encode_plain(r) for r in results)).hexdigest() == results_sha
    assert hashlib.sha256(plugin.combine(params, results).data).hexdigest() == png_sha
