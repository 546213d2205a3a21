#!/usr/bin/env python3
"""Checks a `p5 export perfetto` trace with Perfetto's own generated protobuf classes (the
`perfetto` PyPI package, installed by scripts/install-py.sh) against the SQLite database it
was exported from.

Every packet is decoded (compressed chunks inflated and decoded too) and must hold no field
Perfetto's classes do not know. The packet sequences are replayed as Perfetto's trace
processor reads them: incremental state cleared before use, interned names resolved per
sequence, incremental timestamps accumulated on the sequence clock and mapped to
CLOCK_MONOTONIC by the sequence's clock snapshot, begin/end events paired per track in
time order. Then the tracks, slices, flows and counters are compared with the database's
rows: counts of everything, and every row (or, past --full rows, an evenly spaced sample).

Usage: perfetto_check.py TRACE DB SESSION [--dump FILE]; prints a JSON summary; exits 1 with
the first mismatch, 2 if the perfetto package is missing.
"""

import collections
import json
import re
import sqlite3
import sys
import zlib

try:
    from google.protobuf import unknown_fields
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
except ImportError as e:  # fail loudly: the test must not pass without Perfetto's classes
    print(f"perfetto_check: the perfetto PyPI package is missing ({e}); run scripts/install-py.sh",
          file=sys.stderr)
    sys.exit(2)

MONOTONIC, REALTIME, SEQ_CLOCK = 3, 1, 64
CLEARED, NEEDS = 1, 2
BEGIN, END, INSTANT, COUNTER = 1, 2, 3, 4
FULL = 200_000


class Mismatch(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Mismatch(what)


def no_unknown_fields(msg, path="packet"):
    check(len(unknown_fields.UnknownFieldSet(msg)) == 0, f"{path}: fields Perfetto does not know")
    for field, value in msg.ListFields():
        if field.type == field.TYPE_MESSAGE:
            values = value if field.is_repeated else [value]
            for v in values:
                no_unknown_fields(v, f"{path}.{field.name}")


def packets(path):
    """Every packet in file order, compressed chunks' packets in place."""
    trace = pb.Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    for p in trace.packet:
        if p.HasField("compressed_packets"):
            check(p.ByteSize() < 512 * 1024, "a compressed packet over 512 KB")
            inner = pb.Trace()
            inner.ParseFromString(zlib.decompress(p.compressed_packets))
            for q in inner.packet:
                check(not q.HasField("compressed_packets"), "nested compressed packets")
                yield q
        else:
            yield p


class Sequence:
    def __init__(self):
        self.cleared = False
        self.clock = None  # (value of clock 64, CLOCK_MONOTONIC) at the snapshot
        self.value = None
        self.default_clock = None
        self.default_track = None
        self.names, self.args, self.strings, self.locations = {}, {}, {}, {}
        self.last = None


def replay(path):
    tracks, seqs = {}, collections.defaultdict(Sequence)
    events = []  # (track, ts, type, name, args, flows, terminating, location)
    stats = collections.Counter()
    global_clock = None
    for p in packets(path):
        stats["packets"] += 1
        no_unknown_fields(p)
        check(p.HasField("trusted_packet_sequence_id"), "a packet without a sequence id")
        s = seqs[p.trusted_packet_sequence_id]
        if p.sequence_flags & CLEARED:
            s.__init__()
            s.cleared = True
        if p.sequence_flags & NEEDS:
            check(s.cleared, "a packet needing incremental state before it was cleared")
        if p.HasField("trace_packet_defaults"):
            d = p.trace_packet_defaults
            s.default_clock = d.timestamp_clock_id if d.HasField("timestamp_clock_id") else None
            te = d.track_event_defaults
            s.default_track = te.track_uuid if te.HasField("track_uuid") else None
        if p.HasField("clock_snapshot"):
            clocks = {c.clock_id: c for c in p.clock_snapshot.clocks}
            if SEQ_CLOCK in clocks:
                check(clocks[SEQ_CLOCK].is_incremental, "sequence clock not incremental")
                s.clock = (clocks[SEQ_CLOCK].timestamp, clocks[MONOTONIC].timestamp)
                s.value = clocks[SEQ_CLOCK].timestamp
            else:
                check(p.clock_snapshot.primary_trace_clock == MONOTONIC, "trace clock not MONOTONIC")
                global_clock = (clocks[MONOTONIC].timestamp, clocks[REALTIME].timestamp)
        if p.HasField("interned_data"):
            check(p.sequence_flags & NEEDS, "interned data without SEQ_NEEDS_INCREMENTAL_STATE")
            i = p.interned_data
            for table, items, value in ((s.names, i.event_names, "name"),
                                        (s.args, i.debug_annotation_names, "name"),
                                        (s.strings, i.debug_annotation_string_values, "str")):
                for n in items:
                    check(n.iid not in table, f"iid {n.iid} interned twice")
                    table[n.iid] = getattr(n, value)
            for loc in i.source_locations:
                s.locations[loc.iid] = (loc.file_name, loc.function_name, loc.line_number)
        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            check(d.uuid not in tracks, f"track {d.uuid} described twice")
            tracks[d.uuid] = d
        if not p.HasField("track_event"):
            continue
        check(p.HasField("timestamp"), "an event without a timestamp")
        clock = p.timestamp_clock_id if p.HasField("timestamp_clock_id") else s.default_clock
        check(clock == SEQ_CLOCK and s.clock is not None, "an event not on its sequence clock")
        s.value += p.timestamp
        ts = s.clock[1] + (s.value - s.clock[0])
        check(s.last is None or ts >= s.last, "timestamps going back on a sequence")
        s.last = ts
        e = p.track_event
        track = e.track_uuid if e.HasField("track_uuid") else s.default_track
        name = None
        if e.HasField("name_iid"):
            check(e.name_iid in s.names, f"event name iid {e.name_iid} not interned")
            name = s.names[e.name_iid]
        args = {}
        for a in e.debug_annotations:
            check(a.name_iid in s.args, "argument name not interned")
            if a.HasField("string_value_iid"):
                args[s.args[a.name_iid]] = s.strings[a.string_value_iid].decode()
            else:
                args[s.args[a.name_iid]] = a.int_value
        loc = s.locations.get(e.source_location_iid) if e.HasField("source_location_iid") else None
        value = e.double_counter_value if e.HasField("double_counter_value") else e.counter_value
        events.append((track, ts, e.type, name, args, list(e.flow_ids),
                       list(e.terminating_flow_ids), loc, value))
    check(global_clock is not None, "no trace-wide clock snapshot")
    return tracks, events, stats, global_clock


def slices(tracks, events):
    """Pairs begin/end per track (events of a track are on one sequence, in order)."""
    open_, out, instants, counters = collections.defaultdict(list), [], [], []
    for track, ts, ty, name, args, flows, term, loc, value in events:
        check(track in tracks, f"an event on undescribed track {track}")
        if ty == BEGIN:
            open_[track].append([track, name, ts, None, args, flows, [], loc])
        elif ty == END:
            check(open_[track], f"an end without a begin on track {track}")
            s = open_[track].pop()
            s[3] = ts
            s[6] = term
            check(not flows, "flows on an end event")
            out.append(s)
        elif ty == INSTANT:
            instants.append((track, name, ts, flows, term, loc))
        elif ty == COUNTER:
            check(tracks[track].HasField("counter"), "a counter value on a non-counter track")
            counters.append((track, ts, value))
        else:
            raise Mismatch(f"event type {ty}")
    check(all(not v for v in open_.values()), "slices never ended")
    return out, instants, counters


def path_of(tracks, uuid):
    """("thread", id, child…), ("process", id, child…) or ("host NAME", child…)."""
    d = tracks[uuid]
    if d.HasField("thread"):
        return ("thread", int(re.match(r"p5 thread (\d+)", d.description).group(1)))
    if d.HasField("process"):
        return ("process", int(re.match(r"p5 process (\d+)", d.description).group(1)))
    return path_of(tracks, d.parent_uuid) + (d.name,) if d.HasField("parent_uuid") else (d.name,)


def compare(name, want, got):
    want, got = sorted(want), sorted(got)
    check(len(want) == len(got), f"{name}: {len(got)} in the trace, {len(want)} in the database")
    if len(want) > FULL:  # an evenly spaced sample
        step = len(want) // FULL + 1
        want, got = want[::step], got[::step]
    for w, g in zip(want, got):
        check(w == g, f"{name}: database {w} != trace {g}")
    return len(want)


def main():
    trace, dbpath, session = sys.argv[1:4]
    dump = sys.argv[sys.argv.index("--dump") + 1] if "--dump" in sys.argv else None
    tracks, events, stats, global_clock = replay(trace)
    sl, instants, counters = slices(tracks, events)
    db = sqlite3.connect(f"file:{dbpath}?mode=ro", uri=True)
    q = lambda sql, *a: db.execute(sql, a).fetchall()
    (sid, base, wall), = q("SELECT id, base_mono_ns, base_wall_ns FROM session WHERE name = ?", session)
    check(global_clock == (base, wall), "clock snapshot is not the session's base")
    at = lambda t: base + t
    paths = {u: path_of(tracks, u) for u in tracks}
    # Tracks: every process and thread, with unique pids and tids.
    procs = [d for d in tracks.values() if d.HasField("process")]
    threads = [d for d in tracks.values() if d.HasField("thread")]
    check(len(procs) == q("SELECT COUNT(*) FROM process WHERE session_id = ?", sid)[0][0], "processes")
    check(len(threads) == q("SELECT COUNT(*) FROM thread WHERE session_id = ?", sid)[0][0], "threads")
    check(len({d.process.pid for d in procs}) == len(procs), "pids not unique")
    check(len({d.thread.tid for d in threads}) == len(threads), "tids not unique")
    pids = {d.process.pid for d in procs}
    check(all(d.thread.pid in pids for d in threads), "a thread of no process")
    hosts = {i: n or f"host {i}" for i, n in q("SELECT id, hostname FROM host WHERE session_id = ?", sid)}
    for d in procs:
        pid = int(re.match(r".*pid (\d+)\)", d.description).group(1))
        p5 = path_of(tracks, d.uuid)[1]
        (host, program, real), = q("SELECT host_id, program, pid FROM process WHERE session_id = ? AND id = ?", sid, p5)
        check(d.process.process_name == f"{program} @ {hosts[host]}", "process name without its host")
        check(f"host={hosts[host]}" in d.process.process_labels and pid == real, "process labels")
    sensors = {i: n for i, n in q("SELECT id, name FROM sensor WHERE session_id = ?", sid)}
    host_name = {(n if n.startswith("host ") else f"host {n}"): i for i, n in hosts.items()}
    counts = {}
    # Calls: slices on thread tracks.
    got = [(p[1], n, s, e) for (t, n, s, e, *_r) in sl for p in [paths[t]] if len(p) == 2 and p[0] == "thread"]
    want = [(th, sensors.get(sn, f"{sn & (2**64 - 1):#018x}"), at(a), at(b)) for th, sn, a, b in
            q("SELECT thread_id, sensor_id, t_start, t_end FROM interval WHERE session_id = ?", sid)]
    counts["intervals"] = compare("intervals", want, got)
    # States with their arguments.
    got = [(paths[t][1], n, s, e, a.get("op"), a.get("fd"), a.get("result")) for (t, n, s, e, a, *_r) in sl
           if paths[t][2:] == ("states",)]
    want = [(th, st, at(a), at(b), op, fd if op else None, r if op else None) for th, a, b, st, op, fd, r in
            q("SELECT thread_id, t_start, t_end, state, op, fd, result FROM state WHERE session_id = ?", sid)]
    counts["states"] = compare("states", want, got)
    # On-CPU stretches: of recorded threads, and of the others per host and CPU.
    got = [(paths[t][1], n, s, e) for (t, n, s, e, *_r) in sl if paths[t][2:] == ("on CPU",)]
    want = [(th, f"cpu {c}", at(a), at(b)) for th, c, a, b in
            q("SELECT thread_id, cpu, t_start, t_end FROM sched WHERE session_id = ? AND thread_id IS NOT NULL", sid)]
    counts["sched"] = compare("sched", want, got)
    got = [(host_name[paths[t][0]], paths[t][1], n, s, e) for (t, n, s, e, *_r) in sl
           if paths[t][0].startswith("host ") and paths[t][1].startswith("cpu ")]
    want = [(h, f"cpu {c}", f"tid {tid}", at(a), at(b)) for h, c, tid, a, b in
            q("SELECT host_id, cpu, tid, t_start, t_end FROM sched WHERE session_id = ? AND thread_id IS NULL", sid)]
    counts["sched_unattributed"] = compare("unattributed sched", want, got)
    # Interrupts: slices by time, nested (none is cut in these sessions).
    got = [(host_name[paths[t][0]], paths[t][1], s, e) for (t, n, s, e, *_r) in sl
           if paths[t][0].startswith("host ") and paths[t][1].startswith("irq cpu ")]
    want = [(h, f"irq cpu {c}", at(t), at(t + d)) for h, c, t, d in
            q("SELECT host_id, cpu, t, duration FROM irq WHERE session_id = ?", sid)]
    counts["irqs"] = compare("irqs", want, got)
    # Marks.
    got = [(paths[t][1], n, ts) for (t, n, ts, *_r) in instants if paths[t][2:] == ("marks",)]
    want = [(th, sensors.get(sn), at(t)) for th, sn, t in
            q("SELECT thread_id, sensor_id, t FROM mark WHERE session_id = ?", sid)]
    counts["marks"] = compare("marks", want, got)
    # Flows: one per matched message, from the state slice (or instant) holding the send start
    # to the one holding the receive end, on the right threads.
    starts, ends = {}, {}
    for (t, n, s, e, a, flows, term, loc) in sl:
        for f in flows:
            check(f not in starts, f"flow {f} starts twice")
            starts[f] = (paths[t], s, e)
        for f in term:
            check(f not in ends, f"flow {f} ends twice")
            ends[f] = (paths[t], s, e)
    for (t, n, ts, flows, term, loc) in instants:
        for f in flows:
            starts[f] = (paths[t], ts, ts)
        for f in term:
            ends[f] = (paths[t], ts, ts)
    check(set(starts) == set(ends), "flows with one end")
    msgs = q("SELECT id, send_thread_id, send_t, recv_thread_id, COALESCE(recv_end, recv_t) FROM message "
             "WHERE session_id = ? AND send_thread_id IS NOT NULL AND send_t IS NOT NULL AND "
             "recv_thread_id IS NOT NULL AND COALESCE(recv_end, recv_t) IS NOT NULL", sid)
    check(len(msgs) == len(starts), f"{len(starts)} flows for {len(msgs)} matched messages")
    for m, st, stt, rt, rtt in msgs:
        (sp, ss, se), (rp, rs, re_) = starts[m], ends[m]
        check(sp == ("thread", st, "states") and ss <= at(stt) and (at(stt) < se or ss == se), f"flow {m} start")
        check(rp == ("thread", rt, "states") and rs <= at(rtt) <= re_, f"flow {m} end")
    counts["flows"] = len(msgs)
    # Counters: every sample, scaled.
    metrics = {i: (k, n, e) for i, k, n, e in q("SELECT id, kind, name, scale_exp FROM metric WHERE session_id = ?", sid)}
    got = [(tracks[t].name, ts, round(v, 9)) for t, ts, v in counters]
    want = [(metrics[m][1], at(t), round(v * 10.0 ** metrics[m][2], 9)) for m, t, v in
            q("SELECT metric_id, t, value FROM metric_sample WHERE session_id = ?", sid)]
    counts["counter_values"] = compare("counters", want, got)
    # Source places of calls.
    for (t, n, s, e, a, f, term, loc) in sl[:1000]:
        if paths[t][0] == "thread" and len(paths[t]) == 2 and loc is not None:
            check(loc[1] or loc[0], "an empty source location")
    stats.update(counts)
    stats["tracks"] = len(tracks)
    stats["events"] = len(events)
    if dump:
        write_dump(dump, tracks, paths, sl, instants, counters, base)
    print(json.dumps(stats, sort_keys=True))


def write_dump(path, tracks, paths, sl, instants, counters, base):
    """A readable, stable rendering of the trace: tracks, then events by track and time."""
    lines = []
    for u, d in sorted(tracks.items()):
        what = ("process pid=%d name=%r labels=%s" % (d.process.pid, d.process.process_name, list(d.process.process_labels))
                if d.HasField("process") else
                "thread pid=%d tid=%d name=%r" % (d.thread.pid, d.thread.tid, d.thread.thread_name)
                if d.HasField("thread") else
                "counter unit=%r x%d" % (d.counter.unit_name, d.counter.unit_multiplier or 1)
                if d.HasField("counter") else "track")
        lines.append(f"track {u} parent={d.parent_uuid or '-'} {what} name={d.name!r} path={paths[u]}")
    rows = [(t, s, "slice", f"{n!r} {s - base}..{e - base} {a or ''} flows={f} ends={term} loc={loc}")
            for (t, n, s, e, a, f, term, loc) in sl]
    rows += [(t, ts, "instant", f"{n!r} {ts - base} flows={f} ends={term}") for (t, n, ts, f, term, loc) in instants]
    rows += [(t, ts, "counter", f"{ts - base} {v!r}") for t, ts, v in counters]
    for t, ts, kind, text in sorted(rows, key=lambda r: (r[0], r[1], r[3])):
        lines.append(f"{kind} track={t} {text}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    try:
        main()
    except Mismatch as e:
        print(f"perfetto_check: {e}", file=sys.stderr)
        sys.exit(1)
