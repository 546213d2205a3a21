"""Clock pings: a read's receipt time comes from the kernel's receive stamp of its packet,
taken off our clock by the stamp's age, and never from a stamp that cannot be right."""

import json
import os
import pathlib
import socket
import subprocess
import struct
import sys
import time
import unittest

CLIENT = str(pathlib.Path(__file__).resolve().parents[1])
sys.path.insert(0, CLIENT)

import p5  # noqa: E402  (its helpers are what is tested)


def stamp(ns_ago):
    t = time.time_ns() - ns_ago
    return [(socket.SOL_SOCKET, p5._SO_TIMESTAMPNS, struct.pack("<qq", t // 10**9, t % 10**9))]


class Receipt(unittest.TestCase):
    def test_a_stamp_moves_the_receipt_back_by_its_age(self):
        before = p5._now()
        got = p5._receipt(stamp(5_000_000))
        after = p5._now()
        self.assertLessEqual(before - 5_000_000 - 1_000_000, got)
        self.assertLessEqual(got, after - 5_000_000 + 1_000_000)

    def test_no_stamp_a_future_one_or_an_old_one_give_now(self):
        for anc in ([], stamp(-10_000_000), stamp(2 * 10**9), [(socket.SOL_SOCKET, 99, b"")]):
            before = p5._now()
            got = p5._receipt(anc)
            self.assertLessEqual(before, got)
            self.assertLessEqual(got, p5._now())

    def test_a_real_socket_read_carries_a_stamp(self):
        server = socket.create_server(("127.0.0.1", 0))
        c = socket.create_connection(server.getsockname())
        s, _ = server.accept()
        c.setsockopt(socket.SOL_SOCKET, p5._SO_TIMESTAMPNS, 1)
        s.sendall(b"x")
        time.sleep(0.02)
        data, anc, _, _ = c.recvmsg(16, socket.CMSG_SPACE(16))
        read = p5._now()
        self.assertEqual(data, b"x")
        got = p5._receipt(anc)
        # The packet arrived about 20 ms before the read: the receipt says so.
        self.assertLess(got, read - 10_000_000)
        for x in (server, c, s):
            x.close()


# Runs in a fresh interpreter with recording off, so no shipper thread shares the state.
READ_ACKS = r"""
import json, socket, struct, time, p5
S = p5._Shipper
out = {}
ours, peer = socket.socketpair()
ours.setblocking(False)
S.sock, S.rbuf = ours, b""
ack = p5.wire.frame(p5.wire.ACK, struct.pack("<QQ", 3, 777))
peer.sendall(ack + ack[:5])
time.sleep(0.01)
out["first"] = S.read_acks()
out["echo"] = S.echo[0]
peer.sendall(ack[5:])
time.sleep(0.01)
out["rest"] = S.read_acks()
out["kept"] = S.sock is ours
peer.sendall(struct.pack("<II", 8 << 20, 0) + b"x" * 100_000)
time.sleep(0.01)
out["endless"] = S.read_acks()
out["dropped"] = S.sock is None
out["buffered"] = len(S.rbuf)
print(json.dumps(out))
"""


class ReadAcks(unittest.TestCase):
    """What the log server sends, read by the shipper: acks become the next ping's echo, a
    frame split across reads waits for its end; a peer that sends a frame no log server sends
    loses its connection, not our memory."""

    def test_acks_echoes_split_frames_and_an_endless_one(self):
        env = dict(os.environ, P5_DISABLE="1", PYTHONPATH=CLIENT)
        got = subprocess.run(
            [sys.executable, "-c", READ_ACKS], env=env, capture_output=True, text=True, check=True
        )
        out = json.loads(got.stdout)
        self.assertEqual((out["first"], out["echo"], out["rest"], out["kept"]), (1, 777, 1, True))
        self.assertEqual((out["endless"], out["dropped"]), (0, True))
        self.assertLess(out["buffered"], 200_000)


if __name__ == "__main__":
    unittest.main()
