"""Live measurements for the information and owner policies: sampler, probe, calibration, owner signals."""

from frost_core.measure.calibrate import Extremities, load_or_measure, measure_extremities, measure_speed
from frost_core.measure.owner_activity import Pressure, input_idle_seconds, parse_pressure, read_pressure
from frost_core.measure.probe import probe_share, probe_share_blocking
from frost_core.measure.sampler import ResourceReading, ResourceSampler

__all__ = [
    "Extremities", "Pressure", "ResourceReading", "ResourceSampler", "input_idle_seconds", "load_or_measure",
    "measure_extremities", "measure_speed", "parse_pressure", "probe_share", "probe_share_blocking", "read_pressure",
]
