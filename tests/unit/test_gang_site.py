"""A host's gang bookkeeping: mail delivered once, in sender order, to wherever the member is now."""

from __future__ import annotations

import pytest

from frost_core.api.errors import ProtocolError
from frost_core.cluster.gang_site import (
    COORDINATOR,
    EvictMembers,
    GangSite,
    KillMember,
    LaunchMember,
    Mail,
    MailAck,
    MailBounced,
    ReleaseStep,
    RunStep,
    Send,
    StartMember,
    StepDone,
    StopMember,
)
from frost_core.plugin.gang import MemberCheckpoint


def mail(epoch, superstep, sender, dest, text, reply_to="hs", routed=False):
    return Mail("g", epoch, superstep, sender, dest, (text,), reply_to, routed)


def started(site, rank=1, epoch=1, superstep=0, checkpoint=None):
    return site.handle(StartMember("g", rank, 3, epoch, superstep, checkpoint))


def test_a_member_runs_only_once_the_release_names_every_sender_and_reads_them_in_rank_order():
    site = GangSite("g", "h1")
    assert started(site) == [LaunchMember(1, 1, None), RunStep(1, 1, 0, {})]
    site.handle(StepDone(1, 1, 0, {}, False))
    assert site.handle(mail(1, 0, 2, 1, "from 2", reply_to="h2")) == [Send("h2", MailAck("g", (1, 0, 2, 1), "h1"))]
    assert site.handle(ReleaseStep("g", 1, 1, 1, frozenset({0, 2}))) == []   # rank 0's mail is not in yet
    actions = site.handle(mail(1, 0, 0, 1, "from 0", reply_to="h0"))
    assert actions[-1] == RunStep(1, 1, 1, {0: ["from 0"], 2: ["from 2"]})
    assert list(actions[-1].inbox) == [0, 2]


def test_a_duplicate_is_acknowledged_but_read_once():
    site = GangSite("g", "h1")
    started(site)
    site.handle(StepDone(1, 1, 0, {}, False))
    site.handle(mail(1, 0, 0, 1, "once", reply_to="h0"))
    site.handle(ReleaseStep("g", 1, 1, 1, frozenset({0})))
    again = site.handle(mail(1, 0, 0, 1, "once", reply_to="h0"))
    assert again == [Send("h0", MailAck("g", (1, 0, 0, 1), "h1"))]
    site.handle(StepDone(1, 1, 1, {}, False))
    assert site.handle(ReleaseStep("g", 1, 1, 2, frozenset())) == [RunStep(1, 1, 2, {})]


def test_mail_from_before_a_restart_is_dropped_and_the_member_waits_for_this_epochs():
    site = GangSite("g", "h1")
    image = MemberCheckpoint(1, 3, {"n": 1}, {0: ["kept"]}).to_bytes()
    assert started(site, epoch=2, superstep=3, checkpoint=image)[-1] == RunStep(1, 2, 3, {0: ["kept"]})
    site.handle(StepDone(1, 2, 3, {}, False))
    site.handle(ReleaseStep("g", 1, 2, 4, frozenset({0})))
    assert site.handle(mail(1, 3, 0, 1, "stale")) == []
    assert site.dropped == 1
    assert site.handle(mail(2, 3, 0, 1, "fresh"))[-1] == RunStep(1, 2, 4, {0: ["fresh"]})


def test_a_host_a_member_left_forwards_its_mail_and_the_ack_tells_the_sender_where_it_went():
    old, sender = GangSite("g", "h1"), GangSite("g", "h0")
    started(old, epoch=1)
    assert old.handle(StopMember("g", 1, 2, forward_to="h5")) == [KillMember(1, 1)]
    started(sender, rank=0, epoch=2, superstep=4, checkpoint=MemberCheckpoint(0, 4, {}, {}).to_bytes())
    sender.handle(MailAck("g", (1, 0, 0, 1), "h1"))   # no such mail: learns nothing
    first = sender.handle(StepDone(0, 2, 4, {1: ["m4"]}, False))
    assert first[0] == Send(COORDINATOR, mail(2, 4, 0, 1, "m4", reply_to="h0"))   # unknown: via the coordinator
    sender.handle(MailAck("g", (2, 4, 0, 1), "h1"))                               # it was on h1 then
    sender.handle(ReleaseStep("g", 0, 2, 5, frozenset()))
    second = sender.handle(StepDone(0, 2, 5, {1: ["m5"]}, False))
    assert second[0] == Send("h1", mail(2, 5, 0, 1, "m5", reply_to="h0"))
    assert old.handle(second[0].message) == [Send("h5", second[0].message)]      # forwarded on
    assert old.handle(mail(1, 5, 0, 1, "older")) == []                           # from before the move: dropped
    sender.handle(MailAck("g", (2, 5, 0, 1), "h5"))
    sender.handle(ReleaseStep("g", 0, 2, 6, frozenset()))
    assert sender.handle(StepDone(0, 2, 6, {1: ["m6"]}, False))[0].to == "h5"   # straight there now


def test_routed_mail_waits_for_its_member_and_unrouted_mail_goes_back_home():
    site = GangSite("g", "h1")
    early = mail(1, 0, 0, 1, "early", reply_to="h0", routed=True)
    assert site.handle(early) == []
    stray = mail(1, 0, 2, 1, "stray", reply_to="h2")
    assert site.handle(stray) == [Send("h2", MailBounced(stray))]
    actions = started(site)
    assert Send("h0", MailAck("g", early.key, "h1")) in actions


def test_an_evicted_member_stops_at_once_and_a_late_start_of_its_epoch_is_ignored():
    site = GangSite("g", "h1")
    started(site)
    assert site.handle(EvictMembers()) == [KillMember(1, 1)]
    assert started(site) == []
    assert site.members() == {}
    assert started(site, epoch=2) == [LaunchMember(1, 2, None), RunStep(1, 2, 0, {})]


def test_mail_held_for_a_member_that_went_elsewhere_follows_it_or_is_dropped_when_stale():
    site = GangSite("g", "h1")
    stale = mail(1, 0, 0, 1, "epoch 1", reply_to="h0", routed=True)
    fresh = mail(2, 0, 0, 1, "epoch 2", reply_to="h0", routed=True)
    site.handle(stale)
    site.handle(fresh)
    assert site.handle(StopMember("g", 1, 2, forward_to="h4")) == [Send("h4", fresh)]
    assert site.dropped == 1
    assert started(site, epoch=2) == []   # the member runs on h4 in epoch 2


def test_something_that_is_not_a_gang_message_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="a gang site does not take a dict"):
        GangSite("g", "h1").handle({"rank": 1})
