"""Group commit: what arrives together is committed together, each caller answered with its own outcome."""

import trio
import trio.testing

from frost_core.api.errors import FrostError
from frost_core.master.group_commit import GroupCommit


def test_callers_at_the_same_moment_share_one_commit_and_later_ones_the_next():
    batches: list[list[int]] = []

    async def commit(items):
        batches.append(items)
        await trio.sleep(1)   # an fsync in a worker thread: others arrive meanwhile
        return [item * 10 for item in items]

    async def main():
        group = GroupCommit(commit)
        outcomes = {}

        async def submit(item, after):
            await trio.sleep(after)
            outcomes[item] = await group.submit(item)

        async with trio.open_nursery() as nursery:
            for item in (1, 2, 3):
                nursery.start_soon(submit, item, 0)
            for item in (4, 5):
                nursery.start_soon(submit, item, 0.5)   # while the first batch commits
        assert outcomes == {1: 10, 2: 20, 3: 30, 4: 40, 5: 50}
        assert sorted(map(sorted, batches)) == [[1, 2, 3], [4, 5]]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_failed_commit_fails_every_caller_in_its_batch_and_the_next_batch_still_commits():
    async def commit(items):
        await trio.sleep(1)
        if 1 in items:
            raise OSError("disk full")
        return [True for _ in items]

    async def main():
        group = GroupCommit(commit)
        failed, taken = [], []

        async def submit(item, after):
            await trio.sleep(after)
            try:
                taken.append((item, await group.submit(item)))
            except FrostError as error:
                failed.append((item, type(error.__cause__).__name__))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(submit, 1, 0)
            nursery.start_soon(submit, 2, 0)
            nursery.start_soon(submit, 3, 0.5)
        assert sorted(failed) == [(1, "OSError"), (2, "OSError")]
        assert taken == [(3, True)]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


def test_a_caller_arriving_as_a_batch_ends_neither_returns_early_nor_commits_beside_another():
    """A waiter is woken to commit next; before it runs, a new caller finds nobody committing and takes the
    waiter's item into its own batch. The waiter must then wait for that batch, not commit an empty one of its
    own and return with no outcome (the master took a result so answered as refused, and said the result
    "came again"; 9 of a 1,000-unit run's results on one node)."""
    batches: list[list[int]] = []
    committing = []
    first_ends = trio.Event()

    async def commit(items):
        batches.append(items)
        committing.append(items)
        assert len(committing) == 1, f"two batches committed at once: {committing}"
        await (first_ends.wait() if items == [1] else trio.sleep(1))
        committing.remove(items)
        return [item * 10 for item in items]

    async def main():
        group = GroupCommit(commit)
        outcomes = {}

        async def first_then_third():
            outcomes[1] = await group.submit(1)
            outcomes[3] = await group.submit(3)   # at once: the waiter (2) has been woken but has not run yet

        async def second():
            outcomes[2] = await group.submit(2)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(first_then_third)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(second)
            await trio.testing.wait_all_tasks_blocked()
            first_ends.set()
        assert outcomes == {1: 10, 2: 20, 3: 30}
        assert [] not in batches and sorted(map(sorted, batches)) == [[1], [2, 3]]

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
