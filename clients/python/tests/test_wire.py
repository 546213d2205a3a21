"""The Python encoder against the shared test vectors, and the decorator's behaviour."""

import asyncio
import json
import os
import pathlib
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import p5  # noqa: E402
from p5 import wire  # noqa: E402

VECTORS = pathlib.Path(__file__).resolve().parents[3] / "wire" / "test_vectors" / "vectors.json"


def encode(inp):
    f = inp["frame"]
    if f == "hello":
        return wire.hello(
            inp["process_uid"], inp["pid"], inp["ppid"], inp["start_wall_ns"],
            inp["start_mono_ns"], inp["host_id"], inp["boot_id"], inp["hostname"],
            inp["program"], inp["session"], inp["argv"], caps=inp["caps"],
            clock=inp["clock"], runtime=inp["runtime"], version=inp["version"])
    if f == "stream_open":
        return wire.stream_open(inp["stream"], inp["seq"], inp["t_p"], inp["kind"], inp["tid"],
                                inp["name"])
    if f == "stream_close":
        return wire.stream_close(inp["stream"], inp["seq"], inp["t_p"], inp["t_end"],
                                 inp["dropped"])
    if f == "ping":
        return wire.ping(inp["t_p"], inp["echo_t_s"], inp["echo_t_p"])
    if f == "goodbye":
        return wire.goodbye(inp["t_p"])
    if f == "sensors":
        return wire.sensors(inp["stream"], inp["seq"], inp["t_p"], inp["table"])
    if f == "events":
        b = wire.Events()
        for e in inp["events"]:
            k = e["kind"]
            if k == "comm":
                b.comm(e["t"], e["sensor"], wire.OPS[e["op"]], e["fd"], e["duration"],
                       e["result"], e["peer"])
            elif k == "socket":
                b.socket(e["t"], e["sensor"], e["fd"], e["proto"], e["local"], e["peer"])
            elif k in ("enter", "exit", "mark", "counter"):
                b.add(wire.KIND[k], e["t"], e["sensor"], e.get("value"))
            else:
                return None  # kernel events: not produced by this runtime
        return b.encode(inp["stream"], inp["seq"], inp["t_p"], inp["dropped"])
    return None


class Vectors(unittest.TestCase):
    def test_vectors(self):
        vectors = json.loads(VECTORS.read_text())["vectors"]
        done = 0
        for v in vectors:
            got = encode(v["input"])
            if got is None:
                continue
            self.assertEqual(got.hex(), v["hex"], v["name"])
            done += 1
        self.assertGreaterEqual(done, 7)

    def test_decoders(self):
        vectors = {v["name"]: v for v in json.loads(VECTORS.read_text())["vectors"]}
        ty, body, n = wire.decode_frame(bytes.fromhex(vectors["ack"]["hex"]))
        self.assertEqual((ty, wire.ack(body)), (wire.ACK, {"count": 3, "t_s": 123456}))
        ty, body, _ = wire.decode_frame(bytes.fromhex(vectors["hello_ack"]["hex"]))
        self.assertEqual(wire.hello_ack(body)["server_run_id"], 77)
        bad = bytearray(bytes.fromhex(vectors["ack"]["hex"]))
        bad[-1] ^= 1
        with self.assertRaises(ValueError):
            wire.decode_frame(bytes(bad))


class Describe(unittest.TestCase):
    def test_tables_are_sent_once_on_their_own_stream(self):
        table = "p5-sensors\t1\t/r\tm.py\tpython\tab\n00000000000004d2\tfunction\t1\t1\t2\t2\tf\tf\n"
        p5.describe(table)
        p5.describe(table)
        frames = p5._Shipper.table_frames()
        mine = [f for f in frames if table.encode() in f]
        self.assertEqual(len(mine), 1)
        ty, body, _ = wire.decode_frame(mine[0])
        self.assertEqual(ty, wire.SENSORS)
        self.assertEqual(body[:4], (wire.SENSORS_STREAM).to_bytes(4, "little"))
        self.assertEqual(body[20:].decode(), table)
        self.assertEqual(p5._Shipper.table_frames(), [])


class Decorator(unittest.TestCase):
    def setUp(self):
        # This thread records into a stream of its own that the flusher thread does not know,
        # so the flusher cannot drain events before the test reads them.
        p5._Shipper.start()
        self.saved = getattr(p5._local, "stream", None)
        p5._local.stream = p5._Stream(0)

    def tearDown(self):
        p5._local.stream = self.saved

    def events(self):
        q = p5._stream().queue
        out = [(k, s) for k, _, s, _ in q]
        q.clear()
        return out

    def test_function_generator_coroutine(self):
        @p5.sensor(7)
        def f(x):
            if x:
                raise ValueError(x)
            return 1

        self.events()
        self.assertEqual(f(0), 1)
        with self.assertRaises(ValueError):
            f(1)
        self.assertEqual(self.events(), [(0, 7), (1, 7), (0, 7), (1, 7)])

        @p5.sensor(8)
        def g():
            yield 1
            yield 2

        self.assertEqual(list(g()), [1, 2])
        self.assertEqual(self.events(), [(0, 8), (1, 8)] * 3)

        @p5.sensor(9)
        async def c():
            await asyncio.sleep(0)
            return 3

        @p5.sensor(10)
        async def ag():
            yield 1
            await asyncio.sleep(0)
            yield 2

        async def main():
            return await c(), [x async for x in ag()]

        self.assertEqual(asyncio.run(main()), (3, [1, 2]))
        ev = self.events()
        self.assertEqual(ev.count((0, 9)), ev.count((1, 9)))
        self.assertGreaterEqual(ev.count((0, 9)), 2)  # one span per resumption
        self.assertEqual(ev.count((0, 10)), ev.count((1, 10)))

        class K:
            @p5.sensor(11)
            @staticmethod
            def s():
                return 5

            @p5.sensor(12)
            @classmethod
            def k(cls):
                return cls

        self.assertEqual(p5.call(13, max)(1, 2), 2)
        self.assertEqual(self.events(), [(0, 13), (1, 13)])

        self.assertEqual(K.s(), 5)
        self.assertIs(K.k(), K)
        self.assertEqual([s for _, s in self.events()], [11, 11, 12, 12])

    def test_sensor_over_wraps_the_decorated_function(self):
        seen = []

        def logged(f):
            def inner(*a):
                seen.append(a)
                return f(*a)

            return inner

        class K:
            @p5.sensor_over(14, staticmethod)
            def s():
                return 6

            @p5.sensor_over(15, logged)
            def m(self, x):
                return x * 2

        self.events()
        self.assertEqual(K.s(), 6)
        self.assertEqual(K().m(4), 8)
        self.assertEqual(len(seen), 1)
        self.assertEqual(self.events(), [(0, 14), (1, 14), (0, 15), (1, 15)])


if __name__ == "__main__":
    unittest.main()
