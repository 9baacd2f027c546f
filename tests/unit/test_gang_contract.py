"""The gang plugin contract: supersteps, message delivery, the all-agree rule and the bounds, run locally."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frost_core.api.errors import PluginError
from frost_core.plugin.api import Output, Param, run_locally
from frost_core.plugin.gang import GangPlugin, MemberCheckpoint, Superstep, run_gang_locally
from frost_core.plugin.limits import MAX_MEMBERS, MAX_OUTBOX_BYTES, MEMBER_MEMORY
from frost_core.plugin.plain import encode_plain


class Gossip(GangPlugin):
    """Every member sends its rank to every member (itself included) each superstep and logs its inbox."""

    name = "gossip"
    version = "1"
    params = (Param("size", int, 3, minimum=1, maximum=MAX_MEMBERS), Param("rounds", int, 2, minimum=0))

    def members(self, params):
        return params["size"]

    def start(self, params, rank, size):
        return {"rounds": params["rounds"], "seen": []}

    def step(self, state, rank, size, inbox):
        seen = state["seen"] + [[sender, messages] for sender, messages in inbox.items()]
        if len(seen) == state["rounds"] * size:
            return Superstep({**state, "seen": seen}, done=True)
        return Superstep({**state, "seen": seen}, {dest: [rank, f"from {rank}"] for dest in reversed(range(size))})

    def finish(self, state, rank, size):
        return state["seen"]

    def combine(self, params, results):
        return Output(json.dumps(results).encode(), "application/json", "seen.json")


class Broken(Gossip):
    """Gossip with one thing wrong, chosen by `fault`."""

    def __init__(self, fault):
        self.fault = fault

    def step(self, state, rank, size, inbox):
        answer = super().step(state, rank, size, inbox)
        if self.fault == "disagree" and inbox and not state["seen"] and rank == 1:
            return Superstep(answer.state, done=True)
        if self.fault == "out of range" and rank == 2:
            return Superstep(answer.state, {size: ["hello"]})
        if self.fault == "too large" and rank == 1:
            return Superstep(answer.state, {0: [bytes(MAX_OUTBOX_BYTES)]})
        if self.fault == "set state" and len(state["seen"]) == size:
            return Superstep({"seen": {1, 2}})
        if self.fault == "set message" and rank == 0:
            return Superstep(answer.state, {1: [{1, 2}]})
        if self.fault == "tuple":
            return (answer.state, answer.outbox, answer.done)
        if self.fault == "done and sent":
            return Superstep(answer.state, {0: ["bye"]}, done=answer.done)
        return answer


def test_each_member_reads_what_was_sent_to_it_in_the_previous_superstep_in_sender_order():
    seen = json.loads(run_gang_locally(Gossip(), {"size": "3", "rounds": "2"}).data)
    one_round = [[sender, [sender, f"from {sender}"]] for sender in range(3)]
    assert seen == [one_round * 2] * 3


@pytest.mark.parametrize("checkpoint_every", [1, 2, None])
def test_the_result_does_not_depend_on_checkpoints_between_supersteps(checkpoint_every):
    output = run_gang_locally(Gossip(), {"size": "4", "rounds": "3"}, checkpoint_every=checkpoint_every)
    assert output == run_gang_locally(Gossip(), {"size": "4", "rounds": "3"})


def test_a_gang_that_is_done_at_once_runs_one_superstep():
    assert json.loads(run_gang_locally(Gossip(), {"size": "2", "rounds": "0"}).data) == [[], []]


@pytest.mark.parametrize(("fault", "words"), [
    ("disagree", "superstep 1: rank 1 said done but ranks 0, 2 did not; all members must finish at the same superstep"),
    ("out of range", "superstep 0: rank 2 sent to rank 3, but the ranks of this gang are 0 to 2"),
    ("too large", f"superstep 0: rank 1: the messages is {MAX_OUTBOX_BYTES + 8} bytes encoded, over the limit"),
    ("set state", "rank 0's state and inbox before superstep 3 holds a set, which is not plain CBOR data"),
    ("set message", "superstep 0: rank 0: the messages holds a set"),
    ("tuple", "superstep 0: rank 0: step returned a tuple, not a Superstep"),
    ("done and sent", "superstep 2: rank 0 said done but sent messages to rank 0"),
])
def test_a_broken_gang_gets_an_error_naming_the_superstep_the_rank_and_the_problem(fault, words):
    with pytest.raises(PluginError) as caught:
        run_gang_locally(Broken(fault), {"size": "3", "rounds": "2"})
    assert words in caught.value.message


def test_a_member_count_out_of_bounds_is_refused():
    class Crowd(Gossip):
        def members(self, params):
            return MAX_MEMBERS + 1

    with pytest.raises(PluginError, match=f"members must return a whole number from 1 to {MAX_MEMBERS}, not {MAX_MEMBERS + 1}"):
        run_gang_locally(Crowd())


@pytest.mark.parametrize("memory", [0, -1, 1.5e9, True, "256M"])
def test_a_member_memory_that_is_not_a_positive_whole_number_of_bytes_is_refused(memory):
    class Greedy(Gossip):
        def member_memory(self, params):
            return memory

    with pytest.raises(PluginError, match=f"member_memory must return a whole number of bytes > 0, not {memory!r}"):
        run_gang_locally(Greedy())
    assert Gossip().member_memory({}) == MEMBER_MEMORY == 256 << 20   # undeclared: the default


def test_run_locally_points_a_gang_author_to_run_gang_locally():
    with pytest.raises(PluginError, match="run_gang_locally"):
        run_locally(Gossip())


def test_a_checkpoint_round_trips_and_refuses_a_rank_outside_the_gang():
    checkpoint = MemberCheckpoint(2, 7, {"x": b"\x00"}, {1: ["a"], 0: [1, 2]})
    back = MemberCheckpoint.from_bytes(checkpoint.to_bytes(), 3)
    assert back == MemberCheckpoint(2, 7, {"x": b"\x00"}, {0: [1, 2], 1: ["a"]})
    assert list(back.inbox) == [0, 1]
    with pytest.raises(PluginError, match="names rank 2, not one of 0 to 1"):
        MemberCheckpoint.from_bytes(checkpoint.to_bytes(), 2)


plain_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64 - 1) | st.text(max_size=5) | st.binary(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.integers(-2, 5) | st.text(max_size=2), children, max_size=3),
    max_leaves=12,
)


answers = st.fixed_dictionaries({
    "state": plain_values,
    "outbox": st.dictionaries(st.integers(-1, 3) | st.text(max_size=1), st.lists(plain_values, max_size=2) | plain_values,
                              max_size=3) | plain_values,
    "done": st.booleans() | plain_values,
})


@settings(max_examples=200, deadline=None)
@given(answers | st.dictionaries(st.sampled_from(["state", "outbox", "done", "other"]), plain_values, max_size=4) | plain_values)
def test_decoding_a_step_answer_gives_a_checked_superstep_or_a_plugin_error(plain):
    try:
        answer = Superstep.from_plain(plain, 1, 3, 5)
    except PluginError as error:
        assert error.message.startswith("superstep 5")
        return
    assert isinstance(answer.done, bool)
    assert all(dest in (0, 1, 2) and isinstance(messages, list) and messages for dest, messages in answer.outbox.items())
    assert not (answer.done and answer.outbox)
    assert Superstep.from_plain(answer.to_plain(), 1, 3, 5) == answer


checkpoints = st.fixed_dictionaries({
    "rank": st.integers(-1, 3) | plain_values,
    "superstep": st.integers(-1, 2**64 - 1) | plain_values,
    "state": plain_values,
    "inbox": st.dictionaries(st.integers(-1, 3) | st.text(max_size=1), st.lists(plain_values, max_size=2) | plain_values,
                             max_size=3) | plain_values,
})


@settings(max_examples=200, deadline=None)
@given(checkpoints | plain_values)
def test_decoding_a_checkpoint_gives_a_member_of_the_gang_or_a_plugin_error(plain):
    try:
        checkpoint = MemberCheckpoint.from_bytes(encode_plain(plain), 3)
    except PluginError as error:
        assert "checkpoint" in error.message
        return
    assert checkpoint.rank in (0, 1, 2) and checkpoint.superstep >= 0
    assert list(checkpoint.inbox) == sorted(checkpoint.inbox) and all(s in (0, 1, 2) for s in checkpoint.inbox)
    assert MemberCheckpoint.from_bytes(checkpoint.to_bytes(), 3) == checkpoint
