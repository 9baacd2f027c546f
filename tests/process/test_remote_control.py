"""The remote attach port on the node: what reaches it before any handshake must not stop the node."""

import socket
import struct

from tests.nodes import free_port


def test_clients_that_connect_and_reset_at_once_leave_the_node_answering(single_node):
    port = free_port()
    # Remote attach is off by default: this node's owner opens it on loopback.
    node = single_node(f'\n[control]\nlisten = "127.0.0.1:{port}"\n')
    for _ in range(50):  # as a port scan's connects, each reset before the node looks at it
        probe = socket.create_connection(("127.0.0.1", port), timeout=10)
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        probe.close()
    assert node.call("status")["name"]
    with socket.create_connection(("127.0.0.1", port), timeout=10):
        pass  # still listening
    assert node.process.poll() is None
