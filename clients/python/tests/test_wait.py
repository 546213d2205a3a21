"""Waits (wire op 13): routed select/poll calls and every selector's select — asyncio's loop
among them — are recorded once each, with their time and ready count."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

CLIENT = str(pathlib.Path(__file__).resolve().parents[1])

# Runs in a fresh interpreter (recording is decided at import); the shipper is slowed down so
# the recorded events are still in the thread's queue when they are printed.
SCRIPT = r"""
import asyncio, json, select, selectors, socket
import p5
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
sel = selectors.DefaultSelector()
sel.register(s, selectors.EVENT_READ)
p5.comm(0x51, sel, "select")(0.03)          # routed: one wait under the call site's id
sel.select(0.03)                            # not routed: the selector records it itself
p5.comm(0x52, select, "select")([s], [], [], 0.03)
p = select.poll()
p.register(s, select.POLLIN)
s.sendto(b"x", s.getsockname())
p5.comm(0x53, p, "poll")(1000)              # ready at once
p5.comm(0x54, s, "fileno")()                # not a wait, not a socket call: untouched
asyncio.run(asyncio.sleep(0.05))            # the loop's selector waits
waits = [e for e in p5._stream().queue if e[0] == 4 and e[3][0] == 13]
print(json.dumps([[e[2], e[3][1], e[3][2], e[3][3]] for e in waits]))
print(json.dumps(sel.fileno()))
"""


class WaitTest(unittest.TestCase):
    def test_waits_are_recorded_once_with_their_times(self):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, PYTHONPATH=CLIENT, P5_DIR=d, P5_FLUSH_MS="600000")
            env.pop("P5_LOGSERVER", None)
            env.pop("P5_DISABLE", None)
            out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, check=True,
                                 capture_output=True, text=True).stdout.splitlines()
        waits = json.loads(out[0])
        epfd = json.loads(out[1])
        ms = 1_000_000
        routed = [w for w in waits if w[0] in (0x51, 0x52, 0x53)]
        self.assertEqual([w[0] for w in routed], [0x51, 0x52, 0x53], waits)
        # The routed selector select: its epoll descriptor, 30 ms, nothing ready.
        self.assertEqual((routed[0][1], routed[0][3]), (epfd, 0))
        self.assertGreaterEqual(routed[0][2], 29 * ms)
        # select.select waits on a set (-1); the ready poll found one descriptor at once.
        self.assertEqual((routed[1][1], routed[1][3]), (-1, 0))
        self.assertGreaterEqual(routed[1][2], 29 * ms)
        self.assertEqual(routed[2][3], 1)
        self.assertLess(routed[2][2], 500 * ms)
        # Unrouted selects, under the client's selector sensor: the direct one (30 ms) and
        # asyncio's loop (about 50 ms in all).
        own = [w for w in waits if w[0] not in (0x51, 0x52, 0x53)]
        sys.path.insert(0, CLIENT)
        import p5  # noqa: E402 - only for the constant
        # The id merge knows by name (p5_wire::RUNTIME_SENSORS).
        self.assertEqual(p5.SELECTOR_SENSOR, 0x745FA9F520E46458)
        self.assertTrue(all(w[0] == p5.SELECTOR_SENSOR for w in own), waits)
        self.assertGreaterEqual(own[0][2], 29 * ms)
        # Once each: the routed select is not recorded again by the selector itself (the loop
        # has a selector of its own, with another descriptor).
        self.assertEqual([w[1] for w in own].count(epfd), 1, waits)
        self.assertGreaterEqual(sum(w[2] for w in own[1:]), 45 * ms, waits)


if __name__ == "__main__":
    unittest.main()
