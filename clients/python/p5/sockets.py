"""Communication calls: the socket layer recorded, whoever calls it, and the call sites
p5-instrument routes through `p5.comm`.

Most socket I/O in a Python program happens inside the standard library: `socket.makefile`'s
readers and writers (`socketserver`'s `rfile`/`wfile`, `http.client`'s responses), `sendall`
in `http.client` and `http.server`, asyncio's selector transports and `loop.sock_*` calls,
urllib3 and requests on top of `http.client`. None of those are call sites the instrumenter
can rewrite, so the client wraps the layer itself, once per process, at import: the methods
of `socket.socket` (the Python class every library instantiates: `socket.create_connection`,
`socketserver`, `http.client`, urllib3, asyncio and `accept` all make `socket.socket`
objects, and `makefile`'s `SocketIO` calls `recv_into` and `send` on the socket object) are
replaced by recording ones. The wrapping is on the class, so sockets made before `p5` was
imported are recorded too, and `isinstance` and subclasses are unaffected.

What is recorded is what the native runtime records for the same calls (docs/wire.md):
one comm event per call (op, descriptor, start, duration, bytes or −errno, the peer of
datagram, connect and accept calls) and one socket description per descriptor, made after
a connect (also one in progress, with the address as the peer), for an accepted socket, and
on a descriptor's first recorded use otherwise — once per descriptor until a recorded close,
so a socket detached and taken over by another object (ssl's `wrap_socket` does that) keeps
its description; a descriptor whose endpoints changed (closed unseen and reused) is
described again. Errors are −errno: a timeout is −EAGAIN, as the kernel reports a receive
timeout; a non-blocking call that would block is −EAGAIN (BlockingIOError).

A call an instrumented site routed (`p5.comm(id, sock, "send")(data)`) is recorded there,
under the site's sensor; the site marks its thread's stream busy around the call, and the
wrapped method underneath sees that and records nothing. Calls no site routed are recorded
under the runtime's own sensors, `p5:python:socket.<method>` (FNV-1a of the name, as
`p5.SELECTOR_SENSOR`), which merge names without a manifest. The client's own connection to
the log server is never recorded (its thread is marked quiet).

Not wrapped: TLS (`ssl.SSLSocket` moves its data through OpenSSL on the descriptor, not
through these methods: its connect, accept and close are recorded, its data calls are not),
and a process whose socket calls an interposer already records (`libp5_preload` in
`LD_PRELOAD`, unless `P5_PRELOAD=0` told the interposer to leave this process to its own
runtime); `P5_SOCKETS=0` turns the wrapping off.
"""

import errno
import functools
import os
import socket
import threading
import time
import weakref

_rt = None  # the p5 package module, set by install()
_mono = time.monotonic_ns
_EAGAIN = -errno.EAGAIN
_EINPROGRESS = errno.EINPROGRESS

# fd → [weak reference to the socket object last seen using it, (proto, local, peer)].
_described = {}
_described_lock = threading.Lock()
_PROTO = {
    (socket.AF_INET, socket.SOCK_STREAM): 1, (socket.AF_INET6, socket.SOCK_STREAM): 1,
    (socket.AF_INET, socket.SOCK_DGRAM): 2, (socket.AF_INET6, socket.SOCK_DGRAM): 2,
}
if hasattr(socket, "AF_UNIX"):
    _PROTO[(socket.AF_UNIX, socket.SOCK_STREAM)] = 3
    _PROTO[(socket.AF_UNIX, socket.SOCK_DGRAM)] = 4
    _PROTO[(socket.AF_UNIX, socket.SOCK_SEQPACKET)] = 4


def _fnv(name):
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = (h ^ b) * 0x100000001B3 % (1 << 64)
    return h


def sensor_of(method):
    """The runtime's sensor for a `socket.socket` method no instrumented site routed."""
    return _fnv("p5:python:socket." + method)


def peer(addr):
    """A socket address as the wire's endpoint text (`-` if none)."""
    if isinstance(addr, tuple) and len(addr) >= 2:
        host = str(addr[0])
        return ("[%s]:%d" if ":" in host else "%s:%d") % (host, addr[1])
    if isinstance(addr, (str, bytes)) and addr:
        return "unix:" + (addr.decode(errors="replace") if isinstance(addr, bytes) else addr)
    return "-"


def _address(get):
    try:
        return peer(get())
    except OSError:
        return "-"


def failed(e):
    """The −errno a failed call is recorded with."""
    if isinstance(e, socket.timeout) and not e.errno:
        return _EAGAIN
    return -(e.errno or errno.EIO)


def _endpoints(sock, hint="-"):
    proto = _PROTO.get((sock.family, sock.type), 0)
    remote = _address(sock.getpeername)
    return proto, _address(sock.getsockname), hint if remote == "-" else remote


def describe(sensor_id, sock, fd=None, force=False, hint="-"):
    """Queues a socket description of `sock` (wire kind 5) unless its descriptor is already
    described with these endpoints (`force`: after connect/accept, always). `hint` is the
    peer when the kernel knows none yet (a connect in progress)."""
    if fd is None:
        try:
            fd = sock.fileno()
        except OSError:
            return
    if fd < 0:
        return
    ends = _endpoints(sock, hint)
    try:
        ref = weakref.ref(sock)
    except TypeError:
        ref = lambda: None  # noqa: E731 - never "the same object": described on each use
    with _described_lock:
        d = _described.get(fd)
        if not force and d is not None and d[1] == ends:
            d[0] = ref  # the same connection, now under another object (detach, wrap)
            return
        _described[fd] = [ref, ends]
    proto, local, remote = ends
    _rt._stream().queue.append((5, _rt._now(), sensor_id, (fd, proto, local, remote)))


def forget(fd):
    """The descriptor was closed: its next socket is described anew."""
    with _described_lock:
        _described.pop(fd, None)


def reset():
    """Forgets every description, in a forked child (which describes its sockets in streams
    of its own); the lock is new, as another thread may have held it at the fork."""
    global _described_lock
    _described_lock = threading.Lock()
    _described.clear()


# How each recorded method's result becomes (bytes or new fd, peer): `a` the arguments
# after self, `r` what the call returned.
def _nbytes(data):
    return data.nbytes if isinstance(data, memoryview) else len(data)


def _sendto_peer(a):
    return peer(a[-1]) if len(a) >= 2 else "-"


_RESULTS = {
    "send": (1, lambda a, r: (r, "-")),
    "sendall": (1, lambda a, r: (_nbytes(a[0]) if a else 0, "-")),
    "sendto": (3, lambda a, r: (r, _sendto_peer(a))),
    "sendmsg": (5, lambda a, r: (r, peer(a[3]) if len(a) > 3 else "-")),
    "recv": (2, lambda a, r: (len(r), "-")),
    "recv_into": (2, lambda a, r: (r, "-")),
    "recvfrom": (4, lambda a, r: (len(r[0]), peer(r[1]))),
    "recvfrom_into": (4, lambda a, r: (r[0], peer(r[1]))),
    "recvmsg": (6, lambda a, r: (len(r[0]), peer(r[3]) if len(r) > 3 else "-")),
    "recvmsg_into": (6, lambda a, r: (r[0], peer(r[3]) if len(r) > 3 else "-")),
    "shutdown": (12, lambda a, r: (0, "-")),
}
_CONNECTS = {"connect": 9, "connect_ex": 9}


def _result(name, args, r):
    try:
        n, p = _RESULTS[name][1](args, r)
        return int(n), p
    except Exception:  # a result of a shape this version does not know
        return 0, "-"


def _record(s, sensor_id, op, fd, t, result, remote):
    s.queue.append((4, t - _rt._START_MONO, sensor_id, (op, fd, _mono() - t, result, remote)))


def _connected(sensor_id, sock, fd, t, s, args, result):
    """Records a finished connect/connect_ex (`result` 0 or −errno): a successful one or one in
    progress describes the socket first, as the native runtime does."""
    hint = peer(args[0]) if args else "-"
    if result == 0 or result == -_EINPROGRESS:
        describe(sensor_id, sock, fd, force=True, hint=hint)
        with _described_lock:
            d = _described.get(fd)
        if d is not None and d[1][2] != "-":
            hint = d[1][2]  # the address connected to, resolved
    _record(s, sensor_id, 9, fd, t, result, hint)


def call(sensor_id, sock, name, method, args, kwargs, s):
    """Calls `method` (the socket method `name`, bound to `sock`) and records it on stream
    `s`. The caller checked that recording is on and the stream is not busy."""
    fd = sock.fileno()
    op = _RESULTS.get(name, (None,))[0]
    if op is not None and fd >= 0:
        d = _described.get(fd)
        if d is None or d[0]() is not sock:
            describe(sensor_id, sock, fd)
    t = _mono()
    try:
        r = method(*args, **kwargs)
    except OSError as e:
        if name in _CONNECTS:
            _connected(sensor_id, sock, fd, t, s, args, failed(e))
        elif name == "accept":
            _record(s, sensor_id, 10, fd, t, failed(e), "-")
        elif name == "close":
            _record(s, sensor_id, 11, fd, t, failed(e), "-")
        elif op is not None:
            _record(s, sensor_id, op, fd, t, failed(e), "-")
        raise
    if op is not None:
        n, remote = _result(name, args, r)
        _record(s, sensor_id, op, fd, t, n, remote)
    elif name == "connect":
        _connected(sensor_id, sock, fd, t, s, args, 0)
    elif name == "connect_ex":
        _connected(sensor_id, sock, fd, t, s, args, -int(r) if r else 0)
    elif name == "accept":
        new, addr = r
        nfd = new.fileno()
        _record(s, sensor_id, 10, fd, t, nfd, peer(addr))
        describe(sensor_id, new, nfd, force=True, hint=peer(addr))
    elif name == "close":
        # A socket with makefile() objects open closes its descriptor only when they close.
        if fd >= 0 and sock.fileno() < 0:
            _record(s, sensor_id, 11, fd, t, 0, "-")
            forget(fd)
    return r


# Methods the instrumenter routes through p5.comm (instrument/src/python.rs) that are socket
# calls, and those the socket layer wraps.
ROUTED = frozenset(_RESULTS) | frozenset(_CONNECTS) | {"accept", "close"}
_WRAPPED = sorted(ROUTED - {"close"})


def routed(sensor_id, obj, name, method):
    """`p5.comm(id, sock, name)`: `method` recording each call under the site's sensor; the
    socket layer's own wrapper underneath records nothing (the stream is busy meanwhile)."""

    def recorded(*args, **kwargs):
        if not _rt._on:
            return method(*args, **kwargs)
        s = _rt._stream()
        if s.busy:
            return method(*args, **kwargs)
        s.busy = True
        try:
            return call(sensor_id, obj, name, method, args, kwargs, s)
        finally:
            s.busy = False

    return recorded


def _stream_or_none():
    """This thread's stream, or None on a quiet thread (the client's own)."""
    try:
        return _rt._local.stream
    except AttributeError:
        if getattr(_rt._local, "quiet", False):
            return None
        return _rt._stream()


def _wrap(name, orig):
    sensor_id = sensor_of(name)

    def wrapper(self, *args, **kwargs):
        if not _rt._on:
            return orig(self, *args, **kwargs)
        s = _stream_or_none()
        if s is None or s.busy:
            return orig(self, *args, **kwargs)
        return call(sensor_id, self, name, functools.partial(orig, self), args, kwargs, s)

    return wrapper


def _wrap_hot(name, orig):
    """The data calls of every request and reply, on the shortest path that records them
    (about 0.7 µs a call here: bench/socket_cost.py)."""
    sensor_id = sensor_of(name)
    op = _RESULTS[name][0]
    # How the result gives the bytes: the count returned, the length of the bytes returned,
    # or the length of the data given (sendall returns None).
    how = {"send": 0, "recv_into": 0, "recv": 1, "sendall": 2}[name]
    rt = _rt
    local = rt._local
    described = _described

    def wrapper(self, *args, **kwargs):
        if not rt._on:
            return orig(self, *args, **kwargs)
        try:
            s = local.stream
        except AttributeError:
            s = _stream_or_none()
            if s is None:
                return orig(self, *args, **kwargs)
        if s.busy:
            return orig(self, *args, **kwargs)
        fd = self.fileno()
        d = described.get(fd)
        if d is None or d[0]() is not self:
            describe(sensor_id, self, fd)
        t = _mono()
        try:
            r = orig(self, *args, **kwargs)
        except OSError as e:
            s.queue.append(
                (4, t - rt._START_MONO, sensor_id, (op, fd, _mono() - t, failed(e), "-")))
            raise
        if how == 0:
            n = r
        elif how == 1:
            n = len(r)
        else:
            try:
                n = _nbytes(args[0] if args else kwargs["data"])
            except Exception:
                n = 0
        s.queue.append((4, t - rt._START_MONO, sensor_id, (op, fd, _mono() - t, n, "-")))
        return r

    return wrapper


_HOT = ("send", "sendall", "recv", "recv_into")


def _wrap_close(orig):
    """`socket._real_close`, where the descriptor really closes (`close()` defers to it while
    makefile() objects are open)."""
    sensor_id = sensor_of("close")

    def _real_close(self, *args, **kwargs):
        fd = self.fileno()
        # May run while the interpreter shuts down: recording is off by then.
        if fd < 0 or _rt is None or not _rt._on:
            return orig(self, *args, **kwargs)
        s = _stream_or_none()
        if s is None or s.busy:
            return orig(self, *args, **kwargs)
        t = _mono()
        try:
            r = orig(self, *args, **kwargs)
        except OSError as e:
            _record(s, sensor_id, 11, fd, t, failed(e), "-")
            raise
        _record(s, sensor_id, 11, fd, t, 0, "-")
        forget(fd)
        return r

    return _real_close


def _wrap_sendfile(orig):
    """`socket._sendfile_use_sendfile`: os.sendfile in a loop, recorded as one write (op 8,
    as the native runtime records sendfile) of all it sent. When it gives up before sending
    anything, `sendfile` falls back to send(), which records itself."""
    sensor_id = sensor_of("sendfile")

    def _sendfile_use_sendfile(self, *args, **kwargs):
        if not _rt._on:
            return orig(self, *args, **kwargs)
        s = _stream_or_none()
        if s is None or s.busy:
            return orig(self, *args, **kwargs)
        fd = self.fileno()
        d = _described.get(fd)
        if d is None or d[0]() is not self:
            describe(sensor_id, self, fd)
        t = _mono()
        try:
            r = orig(self, *args, **kwargs)
        except OSError as e:
            if type(e).__name__ != "_GiveupOnSendfile":
                _record(s, sensor_id, 8, fd, t, failed(e), "-")
            raise
        _record(s, sensor_id, 8, fd, t, int(r or 0), "-")
        return r

    return _sendfile_use_sendfile


def wanted():
    """Whether this process's socket layer should be wrapped."""
    if os.environ.get("P5_SOCKETS", "") in ("0", "false", "no"):
        return False
    if os.environ.get("P5_PRELOAD", "").strip().lower() in ("0", "false", "no", "off"):
        return True
    return "p5_preload" not in os.environ.get("LD_PRELOAD", "")


def install(rt):
    """Wraps `socket.socket`'s methods, once per process (a second call, or a second copy of
    the client, finds them wrapped and does nothing)."""
    global _rt
    _rt = rt
    cls = socket.socket
    if getattr(cls, "_p5_wrapped", False):
        return
    for name in _WRAPPED:
        orig = getattr(cls, name, None)
        if orig is None:
            continue
        w = (_wrap_hot if name in _HOT else _wrap)(name, orig)
        functools.update_wrapper(w, orig)
        setattr(cls, name, w)
    cls._real_close = functools.update_wrapper(_wrap_close(cls._real_close), cls._real_close)
    if hasattr(cls, "_sendfile_use_sendfile"):
        orig = cls._sendfile_use_sendfile
        cls._sendfile_use_sendfile = functools.update_wrapper(_wrap_sendfile(orig), orig)
    cls._p5_wrapped = True
