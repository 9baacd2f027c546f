"""A UI on "another machine" (run inside a network namespace): attach with a token from a file and pause.

`python -m tests.multinode.remote_ui HOST PORT TOKEN_FILE` prints `paused` and exits 0 once the
node's pushed snapshot says paused, or prints `not attached` and exits 1 once the node refused the
token (the UI says so), or when no attachment holds within ATTACH_WAIT seconds.
"""

from __future__ import annotations

import sys

import trio

from frost_core import AttachedNode, ClusterKey, PauseHosting, remote_target

ATTACH_WAIT = 10.0


async def pause(host: str, port: int, token: ClusterKey) -> str:
    node = AttachedNode([remote_target((host, port), lambda: token, "remote-ui-test")])
    async with trio.open_nursery() as nursery:
        await nursery.start(node.serve)
        with trio.move_on_after(ATTACH_WAIT):
            while not (node.link().connected or node.link().problem):
                await trio.sleep(0.05)
        if not node.link().connected:
            nursery.cancel_scope.cancel()
            return "not attached"
        node.send_nowait(PauseHosting())
        with trio.fail_after(30):
            while node.snapshot().hosting.state != "paused":
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    return "paused"


def main() -> int:
    host, port, token_file = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    outcome = trio.run(pause, host, port, ClusterKey.from_join_code(open(token_file).read().strip()))
    print(outcome)
    return 0 if outcome == "paused" else 1


if __name__ == "__main__":
    sys.exit(main())
