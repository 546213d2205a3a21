//! Writing the text format: one line per known time of each message, in time order.
//!
//! Lines with equal times are written in the order [`super::Layout::order`] gives when it
//! fits the trace (a trace just read), else by (time, `msg_ref`, send before receive).
//! Fraction digits: the layout's precision, raised to what the times need (a nanosecond
//! time is never rounded).

use super::{Layout, op_name};
use crate::trace::{Message, NO_CALL_ID, Time, Trace};
use crate::{Error, Result};
use std::io::{self, Write};
use std::path::Path;

/// Appends `t` as decimal seconds with `precision` fraction digits (0–9) to `out`. Digits
/// below the precision are truncated (callers pick a precision that needs none).
pub fn format_time(t: Time, precision: u8, out: &mut Vec<u8>) {
    let p = u32::from(precision.min(9));
    let abs = t.unsigned_abs();
    if t < 0 {
        out.push(b'-');
    }
    let secs = abs / 1_000_000_000;
    let nanos = abs % 1_000_000_000;
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut s = secs;
    loop {
        i -= 1;
        buf[i] = b'0' + (s % 10) as u8;
        s /= 10;
        if s == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
    if p > 0 {
        out.push(b'.');
        let mut frac = nanos / 10u64.pow(9 - p);
        let start = out.len();
        out.resize(start + p as usize, b'0');
        for k in (0..p as usize).rev() {
            out[start + k] = b'0' + (frac % 10) as u8;
            frac /= 10;
        }
    }
}

/// The fraction digits `t` needs to be written exactly.
fn needed_precision(t: Time) -> u8 {
    let mut nanos = t.unsigned_abs() % 1_000_000_000;
    if nanos == 0 {
        return 0;
    }
    let mut p = 9;
    while nanos.is_multiple_of(10) {
        nanos /= 10;
        p -= 1;
    }
    p
}

/// True when `order` names every known time of every message exactly once.
fn order_fits(messages: &[Message], order: &[u64]) -> bool {
    let lines: usize = messages
        .iter()
        .map(|m| usize::from(m.send().is_some()) + usize::from(m.recv().is_some()))
        .sum();
    if lines != order.len() || lines == 0 {
        return false;
    }
    let mut seen = vec![0u8; messages.len()];
    for &o in order {
        let (i, recv) = ((o >> 1) as usize, (o & 1) as u8);
        let Some(m) = messages.get(i) else {
            return false;
        };
        let known = if recv == 1 { m.recv() } else { m.send() };
        if known.is_none() || seen[i] & (1 << recv) != 0 {
            return false;
        }
        seen[i] |= 1 << recv;
    }
    true
}

/// Writes `trace` in the text format, laid out as `layout` says (use `Layout::default()`
/// for a fresh file: no header, `\n` endings, as few fraction digits as the times need).
pub fn write<W: Write>(trace: &Trace, layout: &Layout, mut w: W) -> io::Result<()> {
    let msgs = &trace.messages;
    let mut precision = layout.precision;
    for m in msgs {
        for t in [m.send(), m.recv()].into_iter().flatten() {
            precision = precision.max(needed_precision(t));
        }
    }
    let order: Vec<u64> = if order_fits(msgs, &layout.order) {
        layout.order.clone()
    } else {
        let mut ev: Vec<(Time, u64, u64)> = Vec::with_capacity(msgs.len() * 2);
        for (i, m) in msgs.iter().enumerate() {
            if let Some(t) = m.send() {
                ev.push((t, m.msg_ref, (i as u64) << 1));
            }
            if let Some(t) = m.recv() {
                ev.push((t, m.msg_ref, (i as u64) << 1 | 1));
            }
        }
        ev.sort_unstable();
        ev.into_iter().map(|e| e.2).collect()
    };
    let eol: &[u8] = if layout.crlf { b"\r\n" } else { b"\n" };
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut first = true;
    if let Some(h) = &layout.header {
        buf.extend_from_slice(h.as_bytes());
        first = false;
    }
    let mut names: Vec<String> = Vec::new();
    for o in order {
        let m = &msgs[(o >> 1) as usize];
        let recv = o & 1 == 1;
        if !first {
            buf.extend_from_slice(eol);
        }
        first = false;
        let t = if recv { m.t_recv } else { m.t_send };
        format_time(t, precision, &mut buf);
        buf.push(b'\t');
        buf.extend_from_slice(op_name(m.kind, recv).as_bytes());
        buf.push(b'\t');
        buf.extend_from_slice(trace.nodes.name(m.src).as_bytes());
        buf.push(b'\t');
        buf.extend_from_slice(trace.nodes.name(m.dst).as_bytes());
        if m.call_id != NO_CALL_ID {
            buf.push(b'\t');
            match trace.call_id_names.get(m.call_id as usize) {
                Some(name) => buf.extend_from_slice(name.as_bytes()),
                None => {
                    names.clear();
                    names.push(trace.call_id_name(m.call_id));
                    buf.extend_from_slice(names[0].as_bytes());
                }
            }
        }
        if buf.len() > 1 << 16 {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    if !first && layout.final_newline {
        buf.extend_from_slice(eol);
    }
    w.write_all(&buf)?;
    w.flush()
}

/// Writes `trace` to the file `path` (see [`write()`]).
pub fn write_file(trace: &Trace, layout: &Layout, path: &Path) -> Result<()> {
    let f = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    write(trace, layout, io::BufWriter::new(f)).map_err(|e| Error::io(path, e))
}
