"""Whose CPU is whose: /proc/<pid>/stat parsing and a process tree's CPU across reaped children."""

from frost_core.measure.processes import ControlClients, ProcStat, descendants, parse_stat, tree_seconds

# A real /proc/<pid>/stat line whose command holds a space and a parenthesis.
STAT = ("4242 (python3 (x)) S 4000 4242 4000 0 -1 4194560 100 0 0 0 250 50 30 20 39 19 1 0 "
        "123456 1000 100 18446744073709551615 1 1 0 0 0 0 0 16781312 2 0 0 0 17 1 0 5 0 0 0")


def test_stat_gives_parent_nice_policy_and_cpu_of_self_and_reaped_children():
    stat = parse_stat(STAT, ticks=100.0)
    assert (stat.pid, stat.ppid, stat.nice, stat.policy) == (4242, 4000, 19, 5)
    assert (stat.own, stat.reaped, stat.start) == (3.0, 0.5, 1234.56)    # (250 + 50) / 100, (30 + 20) / 100
    assert stat.idle_priority


def _stat(pid, ppid, own, reaped=0.0, nice=0):
    return ProcStat(pid=pid, ppid=ppid, nice=nice, policy=0, own=own, reaped=reaped, start=0.0)


def test_a_child_that_exited_between_readings_still_counts_for_its_tree():
    # node 10 with a probe 11 (1.0 s so far) and a spare 12; an unrelated 20.
    before = {10: _stat(10, 1, 5.0), 11: _stat(11, 10, 1.0), 12: _stat(12, 10, 0.2), 20: _stat(20, 1, 9.0)}
    # then the probe used 0.5 s more and exited; the node reaped it (1.5 s into its reaped time),
    # and a plugin check 13 started and exited in between too (0.3 s, also reaped).
    after = {10: _stat(10, 1, 5.1, reaped=1.8), 12: _stat(12, 10, 0.2), 20: _stat(20, 1, 15.0)}
    assert descendants(before, [10]) == {10, 11, 12}
    used = tree_seconds(after, descendants(after, [10])) - tree_seconds(before, descendants(before, [10]))
    assert round(used, 6) == 0.9          # 0.1 node + 0.5 probe + 0.3 check; none of 20's 6 s


def test_control_clients_count_only_while_connected():
    cpu = {7: 10.0}
    clients = ControlClients(seconds=lambda pid: cpu.get(pid), age=lambda pid: 3600.0)
    clients.connected(7)                   # an hour-old UI: its 10 s before connecting are the owner's
    cpu[7] = 10.4
    assert round(clients.take(), 6) == 0.4
    cpu[7] = 10.5
    clients.disconnected(7)
    cpu[7] = 12.0                          # after it left: the owner's again
    assert round(clients.take(), 6) == 0.1
    assert clients.pids() == set()


def test_a_fresh_cli_call_counts_from_its_start():
    # `frost-tui status` spends ~0.3 s importing before it connects: started to talk to the node,
    # all of it is the node's (the "every status call reads as owner CPU 26 %").
    cpu = {9: 0.3}
    clients = ControlClients(seconds=lambda pid: cpu.get(pid), age=lambda pid: 0.4)
    clients.connected(9)
    cpu[9] = 0.35
    clients.disconnected(9)
    assert round(clients.take(), 6) == 0.35
