"""p5 runtime for Python: sensors for code instrumented by p5-instrument.

Recording never blocks the program: a sensor appends a tuple to its thread's deque; one
daemon thread drains the deques every 20 ms, encodes p5 wire frames (p5.wire) and ships them
to the log server, or appends them to a spool file in local-file mode (P5_DIR without
P5_LOGSERVER) or while the server cannot be reached. Times are nanoseconds since this module
was imported (CLOCK_MONOTONIC). Connected, the same thread pings the log server in bursts, each
ping after the answer to the one before (16 every 100 ms in the connection's first 10 s, then 8
every 500 ms), and echoes each answer's server time with its receipt (the kernel's receive
stamp where there is one): two-way clock samples, as the Rust/C runtime sends. Every
socket.socket call is recorded, whoever makes it (p5.sockets). Environment: P5_LOGSERVER
(host:port), P5_DIR, P5_SESSION, P5_DISABLE=1, P5_FLUSH_MS, P5_SOCKETS=0.
"""

import atexit
import collections
import functools
import inspect
import os
import random
import select as _select
import selectors
import socket
import struct
import sys
import threading
import types
import warnings
import time

from . import sockets, wire

__all__ = [
    "enter", "exit", "mark", "counter", "scope", "sensor", "call", "comm", "flush", "shutdown",
    "describe", "SELECTOR_SENSOR",
]

_START_MONO = time.monotonic_ns()
_START_WALL = time.time_ns()
_on = os.environ.get("P5_DISABLE", "") not in ("1", "true", "yes")
_local = threading.local()
_streams = []
_lock = threading.Lock()
_MAX_BATCH = 4096
# Sensor tables the instrumented modules registered (describe), in order, each once.
_tables = []
_table_set = set()


def describe(table):
    """Registers an instrumented module's sensor table (its text, docs/manifest.md).

    p5-instrument puts the call on the line that imports p5, so it runs when the module is
    imported; the table is sent once, with the next batch, so a recording names its sensors
    and finds their source without a manifest. Cheap, and it never starts recording."""
    with _lock:
        if table not in _table_set:
            _table_set.add(table)
            _tables.append(table)


def _now():
    return time.monotonic_ns() - _START_MONO


class _Stream:
    __slots__ = ("id", "tid", "name", "seq", "queue", "opened", "closed", "busy")

    def __init__(self, sid):
        self.id = sid
        self.tid = threading.get_native_id() if hasattr(threading, "get_native_id") else 0
        self.name = threading.current_thread().name
        self.seq = 0
        self.queue = collections.deque()
        self.opened = False
        self.closed = False
        # Inside a call an instrumented site records (p5.sockets): the socket layer under
        # it records nothing.
        self.busy = False


def _stream():
    s = getattr(_local, "stream", None)
    if s is None:
        with _lock:
            s = _Stream(len(_streams) + 1)
            _streams.append(s)
        _local.stream = s
        _Shipper.start()
    return s


def enter(sensor_id):
    """Records entering the scope of sensor_id."""
    if _on:
        _stream().queue.append((0, _now(), sensor_id, None))


def exit(sensor_id):  # noqa: A001 - the runtime's vocabulary
    """Records leaving the scope of sensor_id."""
    if _on:
        _stream().queue.append((1, _now(), sensor_id, None))


def mark(sensor_id):
    """Records an instant."""
    if _on:
        _stream().queue.append((2, _now(), sensor_id, None))


def counter(sensor_id, value):
    """Records a counter value."""
    if _on:
        _stream().queue.append((3, _now(), sensor_id, int(value)))


def call(sensor_id, f):
    """`p5.call(id, f)(args)`: calls f, recording enter/exit around the call."""
    if not _on:
        return f

    def recorded(*args, **kwargs):
        enter(sensor_id)
        try:
            return f(*args, **kwargs)
        finally:
            exit(sensor_id)

    return recorded


# Waits (wire op 13): time a thread spends in select/poll/epoll or a selector waiting for
# descriptors to become ready is *waiting*, not calculating. Call sites the instrumenter
# routes (`sel.select(t)`, `select.select(r, w, x, t)`, `p.poll(t)` on select.poll/epoll
# objects) record under their own sensor; every other selector wait — asyncio's event loop,
# socketserver, selectors used inside libraries — is recorded by the selector classes
# themselves (patched once at import) under SELECTOR_SENSOR. A wait inside a recorded wait
# (a subclass calling its base's select) is not recorded twice.
_WAIT = 13
# FNV-1a (64 bit) of "p5:python:selectors.select": the sensor of waits no instrumented call
# site made.
SELECTOR_SENSOR = functools.reduce(
    lambda h, b: (h ^ b) * 0x100000001B3 % (1 << 64), b"p5:python:selectors.select",
    0xCBF29CE484222325)
_POLL_TYPES = tuple(
    type(f()) for f in (getattr(_select, n, None) for n in ("poll", "devpoll")) if f is not None
) + tuple(t for t in (getattr(_select, "epoll", None),) if t is not None)


def _wait_fd(obj):
    """The descriptor a wait is on (an epoll instance's), or -1."""
    try:
        return int(obj.fileno())
    except Exception:
        return -1


def _waited(sensor_id, fd, method, args, kwargs):
    """Calls `method`, recording the call as a wait (result: the number of ready entries)."""
    if not _on or getattr(_local, "waiting", False):
        return method(*args, **kwargs)
    _local.waiting = True
    t = _now()
    try:
        r = method(*args, **kwargs)
    except OSError as e:
        _stream().queue.append((4, t, sensor_id, (_WAIT, fd, _now() - t, -(e.errno or 5), "-")))
        raise
    finally:
        _local.waiting = False
    try:
        n = sum(len(x) for x in r) if isinstance(r, tuple) else len(r)
    except TypeError:
        n = 0
    _stream().queue.append((4, t, sensor_id, (_WAIT, fd, _now() - t, n, "-")))
    return r


def _is_wait(obj, name):
    if name == "select":
        return isinstance(obj, selectors.BaseSelector) or obj is _select
    return name == "poll" and isinstance(obj, _POLL_TYPES)


def _patch_selectors():
    """Records every selector's select() (asyncio's loop among them) as a wait."""
    for cls in list(vars(selectors).values()):
        if not (isinstance(cls, type) and issubclass(cls, selectors.BaseSelector)):
            continue
        orig = cls.__dict__.get("select")
        if orig is None or getattr(orig, "_p5_wait", False) or inspect.isabstract(cls):
            continue

        def select(self, timeout=None, _orig=orig):
            return _waited(SELECTOR_SENSOR, _wait_fd(self), _orig, (self, timeout), {})

        functools.update_wrapper(select, orig)
        select._p5_wait = True
        cls.select = select




def comm(sensor_id, obj, name):
    """`p5.comm(id, sock, "send")(data)`: the method `name` of `obj`, recorded as a
    communication call when `obj` is a socket.socket (under the call site's sensor, and not
    again by the wrapped socket layer underneath: p5.sockets), as a wait for `select` on a
    selector or the select module and `poll` on a select.poll/epoll object (any other object
    gets its own method)."""
    method = getattr(obj, name)
    if _on and _is_wait(obj, name):
        fd = -1 if obj is _select else _wait_fd(obj)
        return lambda *args, **kwargs: _waited(sensor_id, fd, method, args, kwargs)
    if not _on or name not in sockets.ROUTED or not isinstance(obj, socket.socket):
        return method
    return sockets.routed(sensor_id, obj, name, method)


class scope:
    """`with p5.scope(id):` records enter and exit around the block."""

    __slots__ = ("id",)

    def __init__(self, sensor_id):
        self.id = sensor_id

    def __enter__(self):
        enter(self.id)
        return self

    def __exit__(self, *exc):
        exit(self.id)
        return False


class _Resumed:
    """Drives a generator, coroutine or awaitable, one sensor span per resumption, so time
    suspended in `yield` or `await` is not charged and other tasks' spans never interleave."""

    __slots__ = ("it", "id")

    def __init__(self, it, sensor_id):
        self.it = it
        self.id = sensor_id

    def __iter__(self):
        return self

    def __await__(self):
        return self

    def __next__(self):
        return self.send(None)

    def send(self, value):
        enter(self.id)
        try:
            return self.it.send(value)
        finally:
            exit(self.id)

    def throw(self, *args):
        enter(self.id)
        try:
            return self.it.throw(*args)
        finally:
            exit(self.id)

    def close(self):
        enter(self.id)
        try:
            return self.it.close()
        finally:
            exit(self.id)


def sensor_over(sensor_id, decorator):
    """`@p5.sensor_over(id, d)` is `@p5.sensor(id)` written above `@d`: the instrumenter's
    form for a decorated function with no free line above it."""

    def decorate(f):
        return sensor(sensor_id)(decorator(f))

    return decorate


def sensor_under(sensor_id, decorator):
    """`@p5.sensor_under(id, d)` is `@d` over `@p5.sensor(id)`: the sensor wraps the plain
    function and `d` gets the wrapper, so whatever `d` makes of it (a descriptor, a property,
    a registry entry) is made exactly as before. The instrumenter's form for decorated
    functions."""

    def decorate(f):
        return decorator(sensor(sensor_id)(f))

    return decorate


def sensor(sensor_id):
    """Decorator: records enter/exit of every call (every resumption for generators,
    coroutines and async generators) and returns the very function it was given.

    Nothing wraps the function: its `__code__` becomes a trampoline with the same parameters
    (names, kinds, flags: a generator function stays one, a coroutine function too) that calls
    the original code between the sensor's enter and exit, so identity, `__closure__`,
    defaults, annotations, attributes, `inspect.signature`/`getfullargspec` and registrations
    made before the sensor all stay as they were. `staticmethod`, `classmethod` and `property`
    objects get their functions instrumented; any other object (a descriptor, a class, a
    callable instance) is returned unchanged: changing it would change what it does."""

    def decorate(f):
        if isinstance(f, (staticmethod, classmethod)):
            decorate(f.__func__)
            return f
        if isinstance(f, property):
            for g in (f.fget, f.fset, f.fdel):
                if g is not None:
                    decorate(g)
            return f
        if isinstance(f, types.FunctionType) and not _instrumented(f):
            try:
                _trampoline(f, sensor_id)
            except Exception:
                pass
        return f

    return decorate


# Trampoline templates: `"\x00…"` constants are placeholders replaced in `co_consts` by the
# original code (as a function), the sensor id and the client's functions.
_PLAIN = r"""
    def _p5_t({params}):
        "\x00enter"("\x00id")
        try:
            return "\x00inner"({args})
        finally:
            "\x00exit"("\x00id")
        {free}
"""
_GENERATOR = r"""
    def _p5_t({params}):
        return (yield from "\x00resumed"("\x00inner"({args}), "\x00id"))
        {free}
"""
_COROUTINE = r"""
    async def _p5_t({params}):
        return await "\x00resumed"("\x00inner"({args}).__await__(), "\x00id")
        {free}
"""
_ASYNCGEN = r"""
    async def _p5_t({params}):
        _p5_it = "\x00inner"({args})
        try:
            while True:
                try:
                    _p5_value = await "\x00resumed"(_p5_it.__anext__(), "\x00id")
                except StopAsyncIteration:
                    return
                yield _p5_value
        finally:
            await _p5_it.aclose()
        {free}
"""
_templates = {}


def _signature(code):
    """The parameter list and the matching argument list of `code`."""
    names = code.co_varnames
    n = code.co_argcount
    posonly = code.co_posonlyargcount
    kwonly = names[n : n + code.co_kwonlyargcount]
    i = n + code.co_kwonlyargcount
    star = names[i] if code.co_flags & inspect.CO_VARARGS else None
    i += 1 if star else 0
    starstar = names[i] if code.co_flags & inspect.CO_VARKEYWORDS else None
    params = list(names[:posonly]) + (["/"] if posonly else []) + list(names[posonly:n])
    args = list(names[:n])
    if star:
        params.append("*" + star)
        args.append("*" + star)
    elif kwonly:
        params.append("*")
    params += kwonly
    args += ["%s=%s" % (k, k) for k in kwonly]
    if starstar:
        params.append("**" + starstar)
        args.append("**" + starstar)
    return ", ".join(params), ", ".join(args)


def _trampoline(f, sensor_id):
    code = f.__code__
    flags = code.co_flags
    if flags & inspect.CO_ASYNC_GENERATOR:
        template = _ASYNCGEN
    elif flags & inspect.CO_COROUTINE:
        template = _COROUTINE
    elif flags & inspect.CO_GENERATOR:
        template = _GENERATOR
    else:
        template = _PLAIN
    params, args = _signature(code)
    nfree = len(code.co_freevars)
    key = (template, params, args, nfree)
    t = _templates.get(key)
    if t is None:
        # The trampoline must have as many free variables as the function has closure cells
        # (only the count is checked): dead references after the return make them.
        dummies = ["_p5_f%d" % i for i in range(nfree)]
        free = ", ".join(dummies) + "," if dummies else "pass"
        body = template.format(params=params, args=args, free=free)
        src = "def _p5_make(%s):\n%s\n    return _p5_t\n" % (", ".join(dummies), body)
        ns = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(compile(src, "<p5>", "exec"), ns)
        t = ns["_p5_make"](*range(nfree)).__code__
        _templates[key] = t
    inner = types.FunctionType(code, f.__globals__, f.__name__, None, f.__closure__)
    values = {
        "\x00inner": inner,
        "\x00id": sensor_id,
        "\x00enter": enter,
        "\x00exit": exit,
        "\x00resumed": _Resumed,
    }
    consts = tuple(
        values.get(c, c) if type(c) is str else c for c in t.co_consts
    )
    changes = {
        "co_consts": consts,
        "co_name": code.co_name,
        "co_filename": code.co_filename,
        "co_firstlineno": code.co_firstlineno,
    }
    if hasattr(code, "co_qualname"):
        changes["co_qualname"] = code.co_qualname
    f.__code__ = t.replace(**changes)


def _instrumented(f):
    """True if `f` already runs through a trampoline (a function gets one sensor)."""
    consts = f.__code__.co_consts
    return any(c is enter for c in consts) or any(c is _Resumed for c in consts)


# Ping bursts: 16 every 100 ms in a connection's first 10 s, then 8 every 500 ms; an answer
# waited for at most 50 ms, a burst at most 20 ms.
_PING_EARLY_S, _PING_EARLY_EVERY_S, _PING_EARLY_BURST = 10.0, 0.1, 16
_PING_EVERY_S, _PING_BURST = 0.5, 8
_PING_ANSWER_S, _PING_BURST_S = 0.05, 0.02
# Most bytes kept of an unfinished frame from the log server (it sends acks and errors).
_MAX_FROM_SERVER = 1 << 16
# SO_TIMESTAMPNS (SCM_TIMESTAMPNS) on Linux, where Python names it not.
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def _receipt(anc):
    """When the packet a read brought arrived, on our clock: now less the age of the
    kernel's receive stamp in the ancillary data (CLOCK_REALTIME, read first, so a pause
    between the two reads makes the receipt late, never early); now where there is none."""
    real = time.time_ns()
    now = _now()
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack_from("<qq", data)
            age = real - (sec * 1_000_000_000 + nsec)
            if 0 <= age < 1_000_000_000:
                return max(0, now - age)
    return now


def _program():
    """The process's name: the module `python -m module` runs (a package's, for its
    `__main__`), the script `python script.py` runs, else the interpreter (`-c`, a REPL)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None)
    if name:
        return name[: -len(".__main__")] if name.endswith(".__main__") else name
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 and argv0 != "-c":
        return os.path.basename(argv0)
    return os.path.basename(sys.executable or "") or "python"


def _read(path, default=""):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return default


class _Shipper:
    """The one background thread: drain, encode, ship or spool."""

    thread = None
    wake = threading.Event()
    stop = threading.Event()
    flushed = threading.Condition()
    generation = 0
    uid = random.getrandbits(64)
    sock = None
    spool = None
    hello = None
    dropped = 0
    caps = 0
    tables_sent = 0
    tables_seq = 1

    announcement = None

    # Pings: bytes read past the last whole frame, the last ack's (server time, receipt on
    # our clock) to echo, when the next burst is due and when the connection was made.
    rbuf = b""
    echo = (0, 0)
    next_ping = 0.0
    connected_at = 0.0

    @classmethod
    def announce(cls):
        """Binds the abstract unix socket @p5-runtime-PID, as the Rust and C runtime does: a
        host agent finds recording processes by it (its OS monitor follows this process within
        milliseconds). The socket lives as long as the process; failing to make it changes
        nothing else."""
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            s.bind("\0p5-runtime-%d" % os.getpid())
            cls.announcement = s
        except (OSError, AttributeError):
            pass

    @classmethod
    def start(cls):
        if cls.thread is not None:
            return
        with _lock:
            if cls.thread is not None:
                return
            cls.announce()
            cls.thread = threading.Thread(target=cls.run, name="p5-flusher", daemon=True)
            cls.thread.start()
            atexit.register(shutdown)

    @classmethod
    def hello_frame(cls):
        if cls.hello is None:
            boot = _read("/proc/sys/kernel/random/boot_id")
            cls.hello = wire.hello(
                process_uid=cls.uid,
                pid=os.getpid(),
                ppid=os.getppid(),
                start_wall_ns=_START_WALL,
                start_mono_ns=_START_MONO,
                host_id=_read("/etc/machine-id", boot),
                boot_id=boot,
                hostname=socket.gethostname(),
                program=_program(),
                session=os.environ.get("P5_SESSION", ""),
                argv=list(getattr(sys, "orig_argv", None) or sys.argv),
                caps=wire.CAP_EVENTS | wire.CAP_COMM | wire.CAP_PING_ECHO | wire.CAP_SENSORS,
            )
        return cls.hello

    @classmethod
    def open_spool(cls):
        if cls.spool is not None:
            return
        directory = os.environ.get("P5_DIR") or os.environ.get("TMPDIR") or "/tmp"
        session = "".join(
            c if c.isalnum() or c in "-_." else "_" for c in os.environ.get("P5_SESSION", "")
        )[:64]
        if not session or session.startswith("."):
            session = "default" + session
        path = os.path.join(directory, "%s-%d-%016x.p5spool" % (session, os.getpid(), cls.uid))
        os.makedirs(directory, exist_ok=True)
        cls.spool = open(path, "ab")
        cls.spool.write(cls.hello_frame())

    @classmethod
    def connect(cls):
        server = os.environ.get("P5_LOGSERVER")
        if server is None and os.environ.get("P5_DIR"):
            return False
        host, _, port = (server or "127.0.0.1:28725").rpartition(":")
        try:
            s = socket.create_connection((host.strip("[]"), int(port)), timeout=1.0)
            s.sendall(cls.hello_frame())
            buf = b""
            while True:
                got = wire.decode_frame(buf)
                if got:
                    break
                chunk = s.recv(4096)
                if not chunk:
                    raise OSError("log server closed the connection")
                buf += chunk
            ty, body, used = got
            if ty != wire.HELLO_ACK:
                raise OSError("log server refused the handshake")
            cls.caps = wire.hello_ack(body)["caps"]
            try:
                s.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            except OSError:
                pass
            s.setblocking(False)
            cls.sock = s
            cls.rbuf = buf[used:]
            cls.echo = (0, 0)
            cls.connected_at = cls.next_ping = time.monotonic()
            return True
        except (OSError, ValueError):
            return False

    @classmethod
    def emit(cls, frames):
        if not frames:
            return
        data = b"".join(frames)
        if cls.sock is not None:
            try:
                cls.sock.setblocking(True)
                cls.sock.settimeout(1.0)
                cls.sock.sendall(data)
                cls.sock.setblocking(False)
                cls.read_acks()
                return
            except OSError:
                cls.sock = None
        cls.open_spool()
        cls.spool.write(data)
        cls.spool.flush()

    @classmethod
    def read_acks(cls):
        """Reads what the log server sent (the socket's timeout applies to the first read):
        each Ack's server time and its receipt on our clock become the echo of the next ping.
        Returns how many acks came; a closed or broken connection drops the socket."""
        acks = 0
        while cls.sock is not None:
            try:
                data, anc, _, _ = cls.sock.recvmsg(65536, socket.CMSG_SPACE(16))
            except (BlockingIOError, InterruptedError, socket.timeout):
                return acks
            except OSError:
                cls.sock = None
                return acks
            if not data:
                cls.sock = None
                return acks
            receipt = _receipt(anc)
            cls.rbuf += data
            if len(cls.rbuf) > _MAX_FROM_SERVER:  # acks and errors are small: a broken peer
                cls.sock = None
                return acks
            while True:
                try:
                    got = wire.decode_frame(cls.rbuf)
                except ValueError:
                    cls.sock = None
                    return acks
                if not got:
                    break
                ty, body, used = got
                cls.rbuf = cls.rbuf[used:]
                if ty == wire.ACK and len(body) >= 16:
                    cls.echo = (wire.ack(body)["t_s"], receipt)
                    acks += 1
            cls.sock.setblocking(False)
        return acks

    @classmethod
    def ping_burst(cls):
        """If a burst is due, pings the log server, each ping after the answer to the one
        before (an answer 50 ms late, or 20 ms of pinging, ends the burst)."""
        now = time.monotonic()
        if cls.sock is None or not cls.caps & wire.CAP_PING_ECHO or now < cls.next_ping:
            return
        early = now - cls.connected_at < _PING_EARLY_S
        cls.next_ping = now + (_PING_EARLY_EVERY_S if early else _PING_EVERY_S)
        end = now + _PING_BURST_S
        for _ in range(_PING_EARLY_BURST if early else _PING_BURST):
            try:
                cls.sock.settimeout(1.0)
                cls.sock.sendall(wire.ping(_now(), *cls.echo))
                cls.sock.settimeout(_PING_ANSWER_S)
            except OSError:
                cls.sock = None
                return
            answered = cls.read_acks()
            if cls.sock is None:
                return
            cls.sock.setblocking(False)
            if not answered or time.monotonic() > end:
                return

    @classmethod
    def table_frames(cls):
        """Sensors frames for the tables registered since the last drain (a log server that
        did not accept them gets none; a spool file does)."""
        if cls.sock is not None and not cls.caps & wire.CAP_SENSORS:
            return []
        with _lock:
            fresh = _tables[cls.tables_sent:]
        cls.tables_sent += len(fresh)
        frames = []
        for t in fresh:
            frames.append(wire.sensors(wire.SENSORS_STREAM, cls.tables_seq, _now(), t))
            cls.tables_seq += 1
        return frames

    @classmethod
    def drain(cls, closing=False):
        frames = cls.table_frames()
        with _lock:
            streams = list(_streams)
        for s in streams:
            if s.closed:
                continue
            if not s.opened:
                frames.append(wire.stream_open(s.id, 0, _now(), 1, s.tid, s.name))
                s.seq = 1
                s.opened = True
            batch = wire.Events()
            q = s.queue
            while q:
                kind, t, sid, value = q.popleft()
                if kind == 4:
                    op, fd, duration, result, peer = value
                    try:
                        batch.comm(t, sid, op, fd, duration, result, peer)
                    except ValueError:  # a peer name that is not an address
                        batch.comm(t, sid, op, fd, duration, result, "-")
                elif kind == 5:
                    fd, proto, local, peer = value
                    try:
                        batch.socket(t, sid, fd, proto, local, peer)
                    except ValueError:
                        batch.socket(t, sid, fd, proto, "-", "-")
                else:
                    batch.add(kind, t, sid, value)
                if batch.count >= _MAX_BATCH:
                    frames.append(batch.encode(s.id, s.seq, _now(), 0))
                    s.seq += 1
                    batch = wire.Events()
            if batch.count:
                frames.append(batch.encode(s.id, s.seq, _now(), 0))
                s.seq += 1
            if closing:
                frames.append(wire.stream_close(s.id, s.seq, _now(), _now(), 0))
                s.seq += 1
                s.closed = True
        return frames

    @classmethod
    def run(cls):
        _local.quiet = True  # the log server's connection is not the program's
        period = max(1, int(os.environ.get("P5_FLUSH_MS", "20"))) / 1000.0
        try:
            cls.connect()
        except Exception:  # never let the runtime take the program down
            cls.sock = None
        while not cls.stop.is_set():
            cls.wake.wait(period)
            cls.wake.clear()
            try:
                cls.emit(cls.drain())
                cls.ping_burst()
            except Exception:
                pass
            with cls.flushed:
                cls.generation += 1
                cls.flushed.notify_all()


def flush(timeout=3.0):
    """Waits until everything recorded so far has been shipped or spooled (bounded)."""
    t = _Shipper.thread
    if t is None or not t.is_alive():
        return True
    with _Shipper.flushed:
        target = _Shipper.generation + 2
        _Shipper.wake.set()
        return _Shipper.flushed.wait_for(lambda: _Shipper.generation >= target, timeout)


def shutdown():
    """Flushes, closes every stream, says goodbye and stops recording."""
    global _on
    if _Shipper.thread is None or _Shipper.stop.is_set():
        return
    flush()
    _on = False
    _Shipper.stop.set()
    _Shipper.wake.set()
    _Shipper.thread.join(3.0)
    try:
        _Shipper.emit(_Shipper.drain(closing=True) + [wire.goodbye(_now())])
        if _Shipper.spool is not None:
            _Shipper.spool.close()
        if _Shipper.sock is not None:
            _Shipper.sock.close()
    except Exception:
        pass


def _after_fork():
    """A forked child is a process of its own (socketserver's ForkingMixIn, multiprocessing's
    fork start): a new identity and clock origin, its own streams, shipper, announcement and
    socket descriptions. The parent's shipper thread did not survive the fork; what the
    parent had queued is the parent's to send. Locks are new: another thread may have held
    one when the process forked."""
    global _START_MONO, _START_WALL, _lock, _streams
    _START_MONO = time.monotonic_ns()
    _START_WALL = time.time_ns()
    _lock = threading.Lock()
    _streams = []
    _local.__dict__.clear()
    S = _Shipper
    S.thread, S.sock, S.spool, S.hello, S.announcement = None, None, None, None, None
    S.wake, S.stop, S.flushed = threading.Event(), threading.Event(), threading.Condition()
    S.generation, S.uid, S.dropped, S.caps = 0, random.getrandbits(64), 0, 0
    S.tables_sent, S.tables_seq, S.rbuf, S.echo = 0, 1, b"", (0, 0)
    sockets.reset()


if _on:
    _patch_selectors()
    if sockets.wanted():
        sockets.install(sys.modules[__name__])
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork)
