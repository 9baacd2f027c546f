"""Reciprocity (`cluster.reciprocity`): who gave the cluster more than they took goes first ("I give, so I may take")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def reciprocity_order(submitters: Iterable[str], balance: Mapping[str, float]) -> list[str]:
    """Submitters ranked by their node's given minus received CPU, highest first; ties by id.

    A submitter is `user@node id` (`node.identity.submitter_id`): its node's balance is what it has
    earned. A node nobody has heard of yet counts 0, between the givers and the takers.
    """
    return sorted(submitters, key=lambda s: (-balance.get(s.rpartition("@")[2], 0.0), s))
