"""Load-balancing policies as pure functions over frozen views, shared by the node and the simulator.

Time and randomness come in as arguments; nothing here does I/O or imports trio.
"""

from frost_core.policies.bandwidth import Bandwidths, assumed_bandwidth, estimate_bandwidth
from frost_core.policies.information import (
    Tendency,
    available_power,
    fits_memory,
    guest_available,
    memory_pool,
    smooth,
    tendency,
    worth_publishing,
)
from frost_core.policies.location import (
    Destination,
    added_capacity,
    admits,
    choose_destination,
    choose_source,
    confirm_destination,
    rank_destinations,
)
from frost_core.policies.owner import (
    DeskVerdict, GuestAction, OwnerDecision, OwnerPolicy, OwnerSettings, OwnerState, OwnerView, Preset, decide_owner,
)
from frost_core.policies.prediction import Prediction, distance, predict_destination, predict_move, predict_source
from frost_core.policies.selection import Selection, may_leave, migration_cost, pays_off, select_guest, time_saved
from frost_core.policies.share import resources_per_guest
from frost_core.policies.transfer import (
    Action,
    Mode,
    SystemView,
    TransferDecision,
    decide_transfer,
    summarize,
    system_average,
    thresholds,
    transfer_mode,
)
from frost_core.policies.views import NodeView, PolicySettings, UnitView

__all__ = [
    "Action", "Bandwidths", "Destination", "DeskVerdict", "GuestAction", "Mode", "NodeView", "OwnerDecision", "OwnerPolicy",
    "OwnerSettings", "OwnerState", "OwnerView", "PolicySettings", "Prediction", "Preset", "Selection", "SystemView", "Tendency",
    "TransferDecision", "UnitView", "added_capacity", "admits", "assumed_bandwidth", "available_power",
    "choose_destination",
    "choose_source", "confirm_destination", "decide_owner", "decide_transfer", "distance", "estimate_bandwidth",
    "fits_memory", "guest_available", "may_leave", "memory_pool", "migration_cost", "pays_off", "predict_destination",
    "predict_move", "predict_source", "rank_destinations", "resources_per_guest", "select_guest", "smooth",
    "summarize", "system_average", "tendency", "thresholds", "time_saved", "transfer_mode", "worth_publishing",
]
