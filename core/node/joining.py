"""Leaving one cluster for another while the node runs (`JoinCluster`): what would hold it back, in the owner's words.

A node speaks one cluster key at a time. Work of the cluster it leaves that still involves this machine (guests of
other masters running here, results owed to them, units of its own assignments out on peers, its gangs) could not
be finished or delivered once it speaks another key, so the switch waits for the owner to settle those first, as
`boinccmd --project_detach` would not have them lost silently. Its own units running on this machine go with it.
"""

from __future__ import annotations

from frost_core.api.wording import counted


def what_holds_back(*, guests: int, owed: int, units_out: int, gangs: int) -> str:
    """Why this node may not leave its cluster now, each with what the owner can do about it; "" if nothing does."""
    reasons = []
    if guests:
        reasons.append(f"{counted(guests, 'guest')} of other peers' assignments {'runs' if guests == 1 else 'run'} "
                       "here (evict: e, or `frost-tui evict`)")
    if owed:
        reasons.append(f"{counted(owed, 'outcome')} computed here {'is' if owed == 1 else 'are'} still owed to "
                       "masters of this cluster (they are delivered when those masters answer)")
    if units_out:
        one = units_out == 1
        reasons.append(f"{counted(units_out, 'unit')} of your assignments {'runs' if one else 'run'} on peers (let "
                       f"{'it' if one else 'them'} finish, or cancel {'its assignment' if one else 'their assignments'})")
    if gangs:
        them = "it" if gangs == 1 else "them"
        reasons.append(f"{counted(gangs, 'gang')} of yours {'runs' if gangs == 1 else 'run'} (let {them} finish, "
                       f"or cancel {them})")
    return "; ".join(reasons)
