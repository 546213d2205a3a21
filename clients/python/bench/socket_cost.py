"""What recording the socket layer costs per call: a wrapped `recv_into` (what
`makefile()`'s readers call) against the same call unwrapped (`_socket.socket.recv_into`), in
one process, on a loopback TCP connection with data waiting, so each call returns at once.
Also a `send` and a call through an instrumented site (`p5.comm`).

    P5_DIR=$(mktemp -d) PYTHONPATH=clients/python python3 clients/python/bench/socket_cost.py

Prints the median over rounds of µs per call and the difference (the recording's cost), and
the load. Set P5_FLUSH_MS=600000 to leave the shipper idle (the call's own cost only);
by default the shipper encodes and spools every 20 ms, as it does in a recorded program.
"""

import _socket
import os
import socket
import statistics
import time

import p5

CALLS = 2000  # per round
ROUNDS = 41


def pair():
    server = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(server.getsockname())
    s, _ = server.accept()
    server.close()
    for x in (c, s):
        x.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        x.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    return c, s


def per_call(fill, call):
    """Median µs per call of `call()` over rounds; `fill()` before each round."""
    times = []
    for _ in range(ROUNDS):
        fill()
        t = time.perf_counter_ns()
        for _ in range(CALLS):
            call()
        times.append((time.perf_counter_ns() - t) / CALLS / 1000)
    return statistics.median(times)


def main():
    c, s = pair()
    buf = bytearray(16)
    chunk = b"x" * (16 * CALLS)
    raw_recv_into = _socket.socket.recv_into
    raw_send = _socket.socket.send

    raw_sendall = _socket.socket.sendall

    def fill():
        raw_sendall(c, chunk)
        time.sleep(0.002)  # let it arrive: every recv returns 16 bytes at once

    def drain():
        s.setblocking(False)
        try:
            while raw_recv_into(s, bytearray(1 << 16)):
                pass
        except BlockingIOError:
            pass
        s.setblocking(True)

    site = p5.comm(0x5EED, s, "recv_into")
    rows = [
        ("recv_into, unwrapped", lambda: raw_recv_into(s, buf)),
        ("recv_into, wrapped", lambda: s.recv_into(buf)),
        ("recv_into, instrumented site", lambda: site(buf)),
    ]
    print("load: %s" % open("/proc/loadavg").read().strip())
    print("calls per round %d, rounds %d, shipper every %s ms" % (
        CALLS, ROUNDS, os.environ.get("P5_FLUSH_MS", "20")))
    got = {}
    for name, call in rows:
        got[name] = per_call(fill, call)
        drain()
        print("%-30s %6.2f µs/call" % (name, got[name]))
    base = got["recv_into, unwrapped"]
    print("%-30s %6.2f µs/call" % ("wrapping costs", got["recv_into, wrapped"] - base))
    print("%-30s %6.2f µs/call" % ("a site costs", got["recv_into, instrumented site"] - base))
    # Sends: each a 16-byte send the peer never needs to read within a round (1 MiB buffers).
    for name, call in (("send, unwrapped", lambda: raw_send(c, b"y" * 16)),
                       ("send, wrapped", lambda: c.send(b"y" * 16))):
        got[name] = per_call(drain, call)
        print("%-30s %6.2f µs/call" % (name, got[name]))
    print("%-30s %6.2f µs/call" % ("wrapping costs", got["send, wrapped"] - got["send, unwrapped"]))
    events = sum(len(st.queue) for st in p5._streams)
    print("events still queued: %d" % events)


if __name__ == "__main__":
    main()
