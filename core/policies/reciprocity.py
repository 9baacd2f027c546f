"""Reciprocity (`cluster.reciprocity`): "I give, so I may take" -- what a node gave the cluster offsets its usage."""

from __future__ import annotations


def submitter_node(submitter: str) -> str:
    """The node id of a submitter `user@node id` (`node.identity.submitter_id`): whose giving is its credit."""
    return submitter.rpartition("@")[2]


def credited_usage(usage: float, balance: float) -> float:
    """Fair share's usage of a submitter less its node's net giving (given minus received, when positive).

    A node that has given the cluster more CPU than it took competes as if it had used that much less:
    a submitter whose node gave 3 h net and used 1 h lately ranks with the newcomers (usage 0); one
    whose node only takes keeps its usage as it is. Usage is decayed, the balance is all-time, both in
    speed-unit seconds (about a CPU-second of the reference machine).
    """
    return max(0.0, usage - max(0.0, balance))
