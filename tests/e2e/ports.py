"""ports.py - loopback ports for the servers the end-to-end tests start.

A port is picked below the kernel's ephemeral range: outgoing connections
(the tests' own clients, the gateways' upstream connections) take their
local ports from that range, and one could take a port between our check
and the server's bind. A port is never handed out twice in one process.
"""
import random
import socket

_given = set()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A loopback port nobody listens on at the time of the call."""
    low = _ephemeral_low()
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, max(low, 20001))
        if port in _given:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given.add(port)
        return port
    with socket.socket() as s:  # the low range is full: any free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    _given.add(port)
    return port
