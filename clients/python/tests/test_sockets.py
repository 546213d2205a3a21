"""The socket layer, recorded whoever calls it (p5.sockets): each call once — under the
instrumented site's sensor where one routed it, else under the runtime's — with the result
and the socket descriptions the native runtime records for it; closed, detached and
duplicated sockets, sockets made before p5 was imported, non-blocking calls and timeouts."""

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import unittest

CLIENT = str(pathlib.Path(__file__).resolve().parents[1])

# Each script runs in a fresh interpreter (the wrapping is installed at import) with the
# shipper slowed down, so what was recorded is still in the threads' queues when `dump()`
# prints it: [thread, kind, sensor, fields] for comm (4) and socket (5) events and marks (2).
DUMP = r"""
import json as _json, p5 as _p5
def pair():
    import socket
    server = socket.create_server(("127.0.0.1", 0))
    c = socket.create_connection(server.getsockname())
    s, _ = server.accept()
    return server, c, s
def dump(**extra):
    out = []
    for st in _p5._streams:
        for e in st.queue:
            if e[0] in (4, 5):
                out.append([st.name, e[0], e[2], list(e[3])])
            elif e[0] == 2:
                out.append([st.name, 2, e[2], None])
    print(_json.dumps({"events": out, **extra}), flush=True)
    import os as _os
    _os._exit(0)  # no exit flush: the shipper waits out its slowed period
"""


def run(script, env=None, before=""):
    """Runs `before`, then DUMP and `script`; returns what `dump()` printed."""
    with tempfile.TemporaryDirectory() as d:
        e = dict(os.environ, PYTHONPATH=CLIENT, P5_DIR=d, P5_FLUSH_MS="600000")
        for k in ("P5_LOGSERVER", "P5_DISABLE", "P5_SOCKETS", "LD_PRELOAD"):
            e.pop(k, None)
        e.update(env or {})
        got = subprocess.run([sys.executable, "-c", before + DUMP + script], env=e,
                             capture_output=True, text=True)
    if got.returncode != 0:
        raise AssertionError(got.stderr)
    return json.loads(got.stdout.splitlines()[-1])


sys.path.insert(0, CLIENT)
from p5 import sockets  # noqa: E402 - the sensor ids only

SEND, RECV, CONNECT, ACCEPT, CLOSE = 1, 2, 9, 10, 11
EAGAIN, EBADF, EINPROGRESS = 11, 9, 115


def comms(out, fd=None, op=None):
    """The comm events, as (sensor, op, fd, result, peer), of `fd` and `op` if given."""
    return [(e[2], e[3][0], e[3][1], e[3][3], e[3][4]) for e in out["events"]
            if e[1] == 4 and e[3][0] != 13 and (fd is None or e[3][1] == fd)
            and (op is None or e[3][0] == op)]


def descriptions(out, fd):
    return [tuple(e[3][1:]) for e in out["events"] if e[1] == 5 and e[3][0] == fd]


class Routing(unittest.TestCase):
    def test_a_routed_call_is_recorded_once_under_its_site_and_others_under_the_runtime(self):
        out = run(r"""
server, c, s = pair()
p5 = _p5
p5.comm(0x71, c, "sendall")(b"hello")
n = p5.comm(0x72, s, "recv_into")(bytearray(16))
c.sendall(b"world!")
s.recv(16)
dump(c=c.fileno(), s=s.fileno(), n=n)
""")
        c, s = out["c"], out["s"]
        self.assertEqual(out["n"], 5)
        self.assertEqual(comms(out, c, SEND), [
            (0x71, SEND, c, 5, "-"), (sockets.sensor_of("sendall"), SEND, c, 6, "-")])
        self.assertEqual(comms(out, s, RECV), [
            (0x72, RECV, s, 5, "-"), (sockets.sensor_of("recv"), RECV, s, 6, "-")])

    def test_the_sensors_are_the_ones_merge_names(self):
        # p5_wire::RUNTIME_SENSORS holds these ids (FNV-1a of the names).
        self.assertEqual(sockets.sensor_of("recv_into"), 0x0B1CDD4BBD016404)
        self.assertEqual(sockets.sensor_of("sendall"), 0x852B798D4879325E)


class Layer(unittest.TestCase):
    def test_makefile_readers_and_writers_and_the_real_close(self):
        out = run(r"""
server, c, s = pair()
w = c.makefile("wb")
w.write(b"line\n"); w.flush()
r = s.makefile("rb")
line = r.readline()
c.close()          # the writer is still open: the descriptor stays open
_p5.mark(0x99)
w.close()          # now it closes
c.close()          # closed already: nothing
dump(line=line.decode())
""")
        self.assertEqual(out["line"], "line\n")
        sends = comms(out, op=SEND)
        recvs = comms(out, op=RECV)
        self.assertEqual([(x[0], x[3]) for x in sends], [(sockets.sensor_of("send"), 5)])
        self.assertEqual([(x[0], x[3]) for x in recvs], [(sockets.sensor_of("recv_into"), 5)])
        c = sends[0][2]
        kinds = [(e[1], e[3][0] if e[3] else None) for e in out["events"]
                 if e[1] == 2 or (e[1] == 4 and e[3][1] == c and e[3][0] == CLOSE)]
        self.assertEqual(kinds, [(2, None), (4, CLOSE)], out["events"])

    def test_connect_and_accept_describe_their_sockets(self):
        out = run(r"""
import socket
server = socket.create_server(("127.0.0.1", 0))
c = socket.socket()
c.setblocking(False)
try:
    c.connect(server.getsockname())
    started = 0
except BlockingIOError as e:
    started = -e.errno
s, addr = server.accept()
dump(c=c.fileno(), s=s.fileno(), server=list(server.getsockname()), client=list(addr),
     started=started)
""")
        srv = "127.0.0.1:%d" % out["server"][1]
        cli = "127.0.0.1:%d" % out["client"][1]
        self.assertIn(out["started"], (0, -EINPROGRESS))
        # A connect in progress is described too, the address it goes to as its peer.
        self.assertEqual(comms(out, out["c"], CONNECT),
                         [(sockets.sensor_of("connect"), CONNECT, out["c"], out["started"], srv)])
        self.assertEqual(descriptions(out, out["c"]), [(1, cli, srv)])
        accept = comms(out, op=ACCEPT)
        self.assertEqual([(a[3], a[4]) for a in accept], [(out["s"], cli)])
        self.assertEqual(descriptions(out, out["s"]), [(1, srv, cli)])
        # Described once each, and recorded in order: the description before the connect's
        # event, the accept's before the description of what it accepted.
        kinds = [(e[1], e[3][0]) for e in out["events"]]
        self.assertLess(kinds.index((5, out["c"])), kinds.index((4, CONNECT)))
        self.assertLess(kinds.index((4, ACCEPT)), kinds.index((5, out["s"])))

    def test_sockets_made_before_p5_was_imported_are_recorded(self):
        out = run(r"""
c.sendall(b"early")
got = s.recv(16)
dump(c=c.fileno(), s=s.fileno(), got=got.decode())
""", before=r"""
import socket
server = socket.create_server(("127.0.0.1", 0))
c = socket.create_connection(server.getsockname())
s, _ = server.accept()
""")
        self.assertEqual(out["got"], "early")
        self.assertEqual(comms(out, out["c"], SEND)[0][3], 5)
        self.assertEqual(comms(out, out["s"], RECV)[0][3], 5)
        # Described on first use, with the connection's endpoints, once each.
        (c,), (s,) = descriptions(out, out["c"]), descriptions(out, out["s"])
        self.assertEqual((c[1], c[2]), (s[2], s[1]))

    def test_closed_sockets_fail_as_before_and_a_reused_descriptor_is_described_anew(self):
        out = run(r"""
import socket
server, c, s = pair()
c.sendall(b"x")
fd = c.fileno()
c.close()
try:
    c.send(b"y")
    err = 0
except OSError as e:
    err = e.errno
c.close()
# The lowest free descriptor: the one just closed, now another connection's.
c2 = socket.create_connection(server.getsockname())
s2, _ = server.accept()
c2.sendall(b"z")
dump(fd=fd, fd2=c2.fileno(), err=err)
""")
        fd = out["fd"]
        self.assertEqual(out["err"], EBADF)
        self.assertEqual(comms(out, -1, SEND), [(sockets.sensor_of("send"), SEND, -1, -EBADF, "-")])
        self.assertEqual(len(comms(out, fd, CLOSE)), 1)
        self.assertEqual(out["fd2"], fd)
        first, again = descriptions(out, fd)
        self.assertNotEqual(first, again)

    def test_a_detached_descriptor_keeps_its_description_a_duplicate_gets_its_own(self):
        out = run(r"""
import socket
server, c, s = pair()
c.sendall(b"a")
fd = c.detach()
c2 = socket.socket(fileno=fd)   # the same connection under another object
c2.sendall(b"bb")
d = c2.dup()
d.sendall(b"ccc")
d.close()
c2.sendall(b"dddd")
dump(fd=fd, dup=d.fileno(), dupfd=-1)
""")
        fd = out["fd"]
        self.assertEqual([x[3] for x in comms(out, fd, SEND)], [1, 2, 4])
        self.assertEqual(len(descriptions(out, fd)), 1)
        dup = [x for x in comms(out, op=SEND) if x[2] != fd]
        self.assertEqual([x[3] for x in dup], [3])
        (d,) = descriptions(out, dup[0][2])
        self.assertEqual(d, descriptions(out, fd)[0])

    def test_non_blocking_calls_and_timeouts_fail_as_before_recorded_as_eagain(self):
        out = run(r"""
import socket
server, c, s = pair()
s.setblocking(False)
try:
    s.recv(16)
    first = "data"
except BlockingIOError:
    first = "BlockingIOError"
s.settimeout(0.05)
try:
    s.recv_into(bytearray(16))
    second = "data"
except socket.timeout:
    second = "timeout"
dump(s=s.fileno(), first=first, second=second)
""")
        self.assertEqual((out["first"], out["second"]), ("BlockingIOError", "timeout"))
        fails = comms(out, out["s"], RECV)
        self.assertEqual([(x[0], x[3]) for x in fails], [
            (sockets.sensor_of("recv"), -EAGAIN), (sockets.sensor_of("recv_into"), -EAGAIN)])
        waited = [e[3][2] for e in out["events"] if e[1] == 4 and e[3][0] == RECV]
        self.assertGreaterEqual(waited[1], 45_000_000)  # the timeout, at least

    def test_sendfile_is_one_write_of_all_it_sent(self):
        out = run(r"""
import tempfile
server, c, s = pair()
with tempfile.TemporaryFile() as f:
    f.write(b"x" * 100_000); f.flush(); f.seek(0)
    sent = c.sendfile(f)
got = 0
while got < sent:
    got += len(s.recv(65536))
dump(c=c.fileno(), sent=sent)
""")
        self.assertEqual(out["sent"], 100_000)
        writes = comms(out, out["c"], 8)
        self.assertEqual([(x[0], x[1], x[3]) for x in writes],
                         [(sockets.sensor_of("sendfile"), 8, 100_000)])

    def test_asyncio_socket_calls_are_recorded_once(self):
        out = run(r"""
import asyncio
server, c, s = pair()
async def main():
    loop = asyncio.get_running_loop()
    c.setblocking(False); s.setblocking(False)
    await loop.sock_sendall(c, b"ping")
    got = await loop.sock_recv(s, 16)
    await loop.sock_sendall(s, got.upper())
    return await loop.sock_recv(c, 16)
got = asyncio.run(main())
dump(c=c.fileno(), s=s.fileno(), got=got.decode())
""")
        self.assertEqual(out["got"], "PING")
        ok = [x for x in comms(out) if x[1] in (SEND, RECV) and x[3] > 0]
        self.assertEqual([(x[1], x[2], x[3]) for x in ok], [
            (SEND, out["c"], 4), (RECV, out["s"], 4), (SEND, out["s"], 4), (RECV, out["c"], 4)])

    def test_the_clients_own_connection_is_not_recorded(self):
        out = run(r"""
import os, socket
listener = socket.create_server(("127.0.0.1", 0))
os.environ["P5_LOGSERVER"] = "127.0.0.1:%d" % listener.getsockname()[1]
listener.settimeout(10)
_p5.mark(0x1)                       # starts the shipper, which connects
conn, _ = listener.accept()
hello = conn.recv(65536)            # it sent its hello; it waits for an answer
dump(names=[st.name for st in _p5._streams], hello=len(hello))
""")
        self.assertGreater(out["hello"], 0)
        self.assertNotIn("p5-flusher", out["names"])
        self.assertEqual({e[0] for e in out["events"]}, {"MainThread"})
        # The main thread's own accept and recv are the program's: recorded.
        self.assertEqual([x[1] for x in comms(out)], [ACCEPT, RECV])


class Fork(unittest.TestCase):
    def test_a_forked_child_records_as_a_process_of_its_own(self):
        with tempfile.TemporaryDirectory() as d:
            script = r"""
import os, socket, sys, p5
server = socket.create_server(("127.0.0.1", 0))
c = socket.create_connection(server.getsockname())
s, _ = server.accept()
c.sendall(b"parent")
pid = os.fork()
if pid == 0:
    c.sendall(b"child")
    kinds = [(e[0], e[3][0]) for st in p5._streams for e in st.queue]
    p5.flush()
    queued = sum(len(st.queue) for st in p5._streams)
    print("child", os.getpid(), len(p5._streams), queued, flush=True)
    print("kinds", kinds == [(5, c.fileno()), (4, 1)], flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("parent", os.getpid(), flush=True)
"""
            env = dict(os.environ, PYTHONPATH=CLIENT, P5_DIR=d, P5_SESSION="fork")
            for k in ("P5_LOGSERVER", "P5_DISABLE", "P5_SOCKETS", "LD_PRELOAD"):
                env.pop(k, None)
            out = subprocess.run([sys.executable, "-c", script], env=env, check=True,
                                 capture_output=True, text=True).stdout.split("\n")
            child = next(x for x in out if x.startswith("child")).split()
            parent = next(x for x in out if x.startswith("parent")).split()
            # One stream (the forking thread's), everything shipped.
            self.assertEqual(child[2:], ["1", "0"])
            spools = {f.split("-")[1]: f for f in os.listdir(d)}
            self.assertEqual(set(spools), {child[1], parent[1]})
            # The child's send, its socket described anew first (the parent's descriptions
            # are the parent's), shipped to a spool of its own.
            self.assertIn("kinds True", out)
            self.assertGreater(pathlib.Path(d, spools[child[1]]).stat().st_size, 100)


class Off(unittest.TestCase):
    CHECK = "import socket; dump(wrapped=getattr(socket.socket, '_p5_wrapped', False))\n"

    def test_p5_sockets_0_and_the_preload_leave_the_socket_layer_alone(self):
        self.assertTrue(run(self.CHECK)["wrapped"])
        self.assertFalse(run(self.CHECK, {"P5_SOCKETS": "0"})["wrapped"])
        # The interposer records these calls already (libc send/recv): not twice.
        fake = {"LD_PRELOAD": "/nonexistent/libp5_preload.so"}
        got = subprocess.run([sys.executable, "-c", "pass"], env=dict(os.environ, **fake),
                             capture_output=True, text=True)
        self.assertEqual(got.returncode, 0)
        self.assertFalse(run(self.CHECK, fake)["wrapped"])
        # P5_PRELOAD=0 leaves this process to its own runtime: wrapped again.
        self.assertTrue(run(self.CHECK, dict(fake, P5_PRELOAD="0"))["wrapped"])


class Names(unittest.TestCase):
    """The program a Python process reports in its hello: the module `-m` runs, the script
    it runs, else the interpreter."""

    def program(self, args, cwd):
        env = dict(os.environ, PYTHONPATH=CLIENT, P5_DISABLE="1")
        got = subprocess.run([sys.executable] + args, env=env, cwd=cwd, check=True,
                             capture_output=True, text=True)
        return got.stdout.strip()

    def test_modules_scripts_and_packages_name_their_process(self):
        with tempfile.TemporaryDirectory() as d:
            body = "import p5\nprint(p5._program())\n"
            pathlib.Path(d, "served.py").write_text(body)
            pathlib.Path(d, "pkg").mkdir()
            pathlib.Path(d, "pkg", "__init__.py").write_text("")
            pathlib.Path(d, "pkg", "__main__.py").write_text(body)
            pathlib.Path(d, "pkg", "tool.py").write_text(body)
            self.assertEqual(self.program(["-m", "served"], d), "served")
            self.assertEqual(self.program(["-m", "pkg"], d), "pkg")
            self.assertEqual(self.program(["-m", "pkg.tool"], d), "pkg.tool")
            self.assertEqual(self.program(["served.py"], d), "served.py")
            self.assertEqual(self.program([str(pathlib.Path(d, "served.py"))], "/"), "served.py")
            exe = os.path.basename(sys.executable)
            self.assertEqual(self.program(["-c", body], d), exe)


if __name__ == "__main__":
    unittest.main()
