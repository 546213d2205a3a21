//! Decoding the kernel's binary trace ring-buffer pages (`per_cpu/cpuN/trace_pipe_raw`):
//! nanosecond timestamps and no text formatting in the kernel, unlike `trace_pipe` (µs, and
//! most of the per-event cost).
//!
//! Page: `u64 timestamp | u64 commit (data length; high bits flag missed events) | data`.
//! Each entry starts with a 32-bit header `type_len:5 | time_delta:27` (little-endian bit
//! order): type_len 1..=28 → `4 × type_len` data bytes follow; 0 → a u32 length word
//! (counting itself) then the data; 29 → padding (time_delta 0: the rest of the page is
//! empty; else a discarded entry sized like type 0); 30 → time extend (`delta +=
//! array[0] << 27`); 31 → absolute time stamp (`array[0] << 27 | time_delta`). Event data
//! starts with `u16 common_type`; field offsets come from each event's `format` file.

use std::collections::HashMap;

/// A decoded scheduler, IRQ or softirq record (times in the trace clock's ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawEvent {
    /// `sched_switch`.
    Switch {
        /// Trace clock ns.
        ts: u64,
        /// Outgoing thread.
        prev_tid: u32,
        /// Its state letter.
        prev_state: u8,
        /// Incoming thread.
        next_tid: u32,
    },
    /// `sched_wakeup`.
    Wakeup {
        /// Trace clock ns.
        ts: u64,
        /// Thread.
        tid: u32,
        /// Target CPU.
        target_cpu: u32,
    },
    /// `irq_handler_entry`.
    IrqEntry {
        /// Trace clock ns.
        ts: u64,
        /// Line.
        irq: u32,
    },
    /// `irq_handler_exit`.
    IrqExit {
        /// Trace clock ns.
        ts: u64,
        /// Line.
        irq: u32,
        /// Nonzero if handled.
        ret: u32,
    },
    /// `softirq_entry`.
    SoftirqEntry {
        /// Trace clock ns.
        ts: u64,
        /// Softirq vector (2 NET_TX, 3 NET_RX, …).
        vec: u32,
    },
    /// `softirq_exit`.
    SoftirqExit {
        /// Trace clock ns.
        ts: u64,
        /// Softirq vector.
        vec: u32,
    },
    /// `task_newtask`: `parent` (the creating thread) made thread or process `tid`.
    NewTask {
        /// Trace clock ns.
        ts: u64,
        /// The creating thread (`common_pid`).
        parent: u32,
        /// The new thread.
        tid: u32,
        /// Its name (NUL-padded).
        comm: [u8; 16],
        /// `clone` flags (`CLONE_THREAD`: a thread of the parent's process).
        flags: u64,
    },
    /// `task_rename`: thread `tid` is now called `comm` (exec, `PR_SET_NAME`).
    Rename {
        /// Trace clock ns.
        ts: u64,
        /// The thread.
        tid: u32,
        /// Its new name (NUL-padded).
        comm: [u8; 16],
    },
}

impl RawEvent {
    /// The record's time.
    pub fn ts(&self) -> u64 {
        match *self {
            RawEvent::Switch { ts, .. }
            | RawEvent::Wakeup { ts, .. }
            | RawEvent::IrqEntry { ts, .. }
            | RawEvent::IrqExit { ts, .. }
            | RawEvent::SoftirqEntry { ts, .. }
            | RawEvent::SoftirqExit { ts, .. }
            | RawEvent::NewTask { ts, .. }
            | RawEvent::Rename { ts, .. } => ts,
        }
    }
}

/// Offset and size of one field of an event's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Byte offset in the record.
    pub offset: usize,
    /// Size in bytes.
    pub size: usize,
}

/// Parses an event's `format` file: its id and its fields by name.
pub fn parse_format(text: &str) -> Option<(u16, HashMap<String, Field>)> {
    let mut id = None;
    let mut fields = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if let Some(v) = line.strip_prefix("ID:") {
            id = v.trim().parse().ok();
            continue;
        }
        let Some(rest) = line.strip_prefix("field:") else {
            continue;
        };
        let mut parts = rest.split(';').map(str::trim);
        let decl = parts.next()?;
        let name = decl.rsplit(' ').next()?.split('[').next()?.to_owned();
        let mut f = Field { offset: 0, size: 0 };
        for p in parts {
            if let Some(v) = p.strip_prefix("offset:") {
                f.offset = v.parse().ok()?;
            } else if let Some(v) = p.strip_prefix("size:") {
                f.size = v.parse().ok()?;
            }
        }
        fields.insert(name, f);
    }
    Some((id?, fields))
}

/// Which record layouts to decode.
#[derive(Debug, Clone, Default)]
pub struct Layouts {
    switch: Option<(u16, [Field; 3])>,
    wakeup: Option<(u16, [Field; 2])>,
    wakeup_new: Option<(u16, [Field; 2])>,
    irq_entry: Option<(u16, Field)>,
    irq_exit: Option<(u16, [Field; 2])>,
    softirq_entry: Option<(u16, Field)>,
    softirq_exit: Option<(u16, Field)>,
    new_task: Option<(u16, [Field; 4])>,
    rename: Option<(u16, [Field; 2])>,
}

fn take<const N: usize>(f: &HashMap<String, Field>, names: [&str; N]) -> Option<[Field; N]> {
    let mut out = [Field { offset: 0, size: 0 }; N];
    for (o, n) in out.iter_mut().zip(names) {
        *o = *f.get(n)?;
    }
    Some(out)
}

impl Layouts {
    /// Reads the six event formats (missing ones are simply not decoded).
    pub fn from_formats(
        switch: Option<&str>,
        wakeup: Option<&str>,
        irq_entry: Option<&str>,
        irq_exit: Option<&str>,
        softirq_entry: Option<&str>,
        softirq_exit: Option<&str>,
    ) -> Self {
        let p = |t: Option<&str>| t.and_then(parse_format);
        Self {
            switch: p(switch)
                .and_then(|(id, f)| Some((id, take(&f, ["prev_pid", "prev_state", "next_pid"])?))),
            wakeup: p(wakeup).and_then(|(id, f)| Some((id, take(&f, ["pid", "target_cpu"])?))),
            irq_entry: p(irq_entry).and_then(|(id, f)| Some((id, take(&f, ["irq"])?[0]))),
            irq_exit: p(irq_exit).and_then(|(id, f)| Some((id, take(&f, ["irq", "ret"])?))),
            softirq_entry: p(softirq_entry).and_then(|(id, f)| Some((id, take(&f, ["vec"])?[0]))),
            softirq_exit: p(softirq_exit).and_then(|(id, f)| Some((id, take(&f, ["vec"])?[0]))),
            new_task: None,
            rename: None,
            wakeup_new: None,
        }
    }

    /// Adds the `sched_wakeup_new` format (decoded as a wakeup).
    pub fn with_wakeup_new(mut self, wakeup_new: Option<&str>) -> Self {
        self.wakeup_new = wakeup_new
            .and_then(parse_format)
            .and_then(|(id, f)| Some((id, take(&f, ["pid", "target_cpu"])?)));
        self
    }

    /// Adds the `task_newtask` and `task_rename` formats.
    pub fn with_tasks(mut self, new_task: Option<&str>, rename: Option<&str>) -> Self {
        let p = |t: Option<&str>| t.and_then(parse_format);
        self.new_task = p(new_task).and_then(|(id, f)| {
            Some((id, take(&f, ["common_pid", "pid", "comm", "clone_flags"])?))
        });
        self.rename = p(rename).and_then(|(id, f)| Some((id, take(&f, ["pid", "newcomm"])?)));
        self
    }

    /// True if sched_switch can be decoded.
    pub fn has_switch(&self) -> bool {
        self.switch.is_some()
    }

    fn decode(&self, ts: u64, rec: &[u8]) -> Option<RawEvent> {
        let ty = u16::from_le_bytes(rec.get(..2)?.try_into().ok()?);
        let rd = |f: Field| -> Option<u64> {
            let b = rec.get(f.offset..f.offset + f.size)?;
            Some(match f.size {
                1 => b[0] as u64,
                2 => u16::from_le_bytes(b.try_into().ok()?) as u64,
                4 => u32::from_le_bytes(b.try_into().ok()?) as u64,
                8 => u64::from_le_bytes(b.try_into().ok()?),
                _ => return None,
            })
        };
        if let Some((id, [pp, ps, np])) = self.switch
            && id == ty
        {
            return Some(RawEvent::Switch {
                ts,
                prev_tid: rd(pp)? as u32,
                prev_state: state_letter(rd(ps)?),
                next_tid: rd(np)? as u32,
            });
        }
        let wakeup = [self.wakeup, self.wakeup_new]
            .into_iter()
            .flatten()
            .find(|w| w.0 == ty);
        if let Some((_, [p, c])) = wakeup {
            return Some(RawEvent::Wakeup {
                ts,
                tid: rd(p)? as u32,
                target_cpu: rd(c)? as u32,
            });
        }
        if let Some((id, i)) = self.irq_entry
            && id == ty
        {
            return Some(RawEvent::IrqEntry {
                ts,
                irq: rd(i)? as u32,
            });
        }
        if let Some((id, [i, r])) = self.irq_exit
            && id == ty
        {
            return Some(RawEvent::IrqExit {
                ts,
                irq: rd(i)? as u32,
                ret: rd(r)? as u32,
            });
        }
        if let Some((id, v)) = self.softirq_entry
            && id == ty
        {
            return Some(RawEvent::SoftirqEntry {
                ts,
                vec: rd(v)? as u32,
            });
        }
        if let Some((id, v)) = self.softirq_exit
            && id == ty
        {
            return Some(RawEvent::SoftirqExit {
                ts,
                vec: rd(v)? as u32,
            });
        }
        let comm = |f: Field| -> Option<[u8; 16]> {
            let b = rec.get(f.offset..f.offset + f.size.min(16))?;
            let mut c = [0u8; 16];
            c[..b.len()].copy_from_slice(b);
            Some(c)
        };
        if let Some((id, [parent, pid, name, flags])) = self.new_task
            && id == ty
        {
            return Some(RawEvent::NewTask {
                ts,
                parent: rd(parent)? as u32,
                tid: rd(pid)? as u32,
                comm: comm(name)?,
                flags: rd(flags)?,
            });
        }
        if let Some((id, [pid, name])) = self.rename
            && id == ty
        {
            return Some(RawEvent::Rename {
                ts,
                tid: rd(pid)? as u32,
                comm: comm(name)?,
            });
        }
        None
    }
}

/// The kernel's letter for a `prev_state` bit set (`R` when none is set).
pub fn state_letter(state: u64) -> u8 {
    const LETTERS: &[u8] = b"SDTtXZPI";
    let s = state & 0xff;
    if s == 0 {
        return b'R';
    }
    LETTERS
        .get(s.trailing_zeros() as usize)
        .copied()
        .unwrap_or(b'?')
}

/// What a page held besides the decoded events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PageStats {
    /// Records of other event types (or undecodable).
    pub other: u64,
    /// The kernel flagged lost events before this page.
    pub missed: bool,
}

/// Decodes one ring-buffer page, appending its events. Total: malformed input ends the
/// page early, never panics.
pub fn decode_page(page: &[u8], layouts: &Layouts, out: &mut Vec<RawEvent>) -> PageStats {
    let mut st = PageStats::default();
    let (Some(ts0), Some(commit)) = (
        page.get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes),
        page.get(8..16)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes),
    ) else {
        return st;
    };
    st.missed = commit & (3 << 30) != 0;
    let len = (commit & 0x3fff_ffff) as usize;
    let data = &page[16..(16 + len).min(page.len())];
    let mut ts = ts0;
    let mut pos = 0usize;
    while pos + 4 <= data.len() {
        let h = u32::from_le_bytes([data[pos], data[pos + 1], data[pos + 2], data[pos + 3]]);
        let type_len = h & 0x1f;
        let delta = (h >> 5) as u64;
        let word = |at: usize| -> Option<u32> {
            Some(u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?))
        };
        match type_len {
            29 => {
                if delta == 0 {
                    break;
                }
                let Some(n) = word(pos + 4) else { break };
                pos += 4 + n as usize;
            }
            30 => {
                let Some(a) = word(pos + 4) else { break };
                ts = ts.wrapping_add(((a as u64) << 27) + delta);
                pos += 8;
            }
            31 => {
                let Some(a) = word(pos + 4) else { break };
                ts = ((a as u64) << 27) | delta;
                pos += 8;
            }
            0 => {
                let Some(n) = word(pos + 4) else { break };
                let n = n as usize;
                ts = ts.wrapping_add(delta);
                let Some(rec) = data.get(pos + 8..(pos + 4 + n).max(pos + 8)) else {
                    break;
                };
                match layouts.decode(ts, rec) {
                    Some(e) => out.push(e),
                    None => st.other += 1,
                }
                if n < 4 {
                    break;
                }
                pos += 4 + n;
            }
            n => {
                let n = n as usize * 4;
                ts = ts.wrapping_add(delta);
                let Some(rec) = data.get(pos + 4..pos + 4 + n) else {
                    break;
                };
                match layouts.decode(ts, rec) {
                    Some(e) => out.push(e),
                    None => st.other += 1,
                }
                pos += 4 + n;
            }
        }
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWITCH: &str = "name: sched_switch\nID: 372\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n";
    const EXIT: &str = "ID: 10\n\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n\tfield:int ret;\toffset:12;\tsize:4;\tsigned:1;\n";

    fn switch_rec(prev: u32, state: u64, next: u32) -> Vec<u8> {
        let mut r = vec![0u8; 64];
        r[..2].copy_from_slice(&372u16.to_le_bytes());
        r[24..28].copy_from_slice(&prev.to_le_bytes());
        r[32..40].copy_from_slice(&state.to_le_bytes());
        r[56..60].copy_from_slice(&next.to_le_bytes());
        r
    }

    fn hdr(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | (delta << 5)).to_le_bytes()
    }

    #[test]
    fn formats_parse() {
        let (id, f) = parse_format(SWITCH).unwrap();
        assert_eq!(id, 372);
        assert_eq!(
            f["prev_comm"],
            Field {
                offset: 8,
                size: 16
            }
        );
        assert_eq!(
            f["next_pid"],
            Field {
                offset: 56,
                size: 4
            }
        );
        assert!(parse_format("no id here").is_none());
        assert_eq!(state_letter(0), b'R');
        assert_eq!(state_letter(1), b'S');
        assert_eq!(state_letter(2), b'D');
        assert_eq!(state_letter(0x80), b'I');
    }

    #[test]
    fn pages_decode_with_deltas_extends_and_padding() {
        let l = Layouts::from_formats(Some(SWITCH), None, None, Some(EXIT), None, None);
        assert!(l.has_switch());
        let mut data = Vec::new();
        // Small record (type_len = 16 words), delta 5.
        data.extend_from_slice(&hdr(16, 5));
        data.extend_from_slice(&switch_rec(7, 1, 9));
        // Time extend by (2 << 27) + 3.
        data.extend_from_slice(&hdr(30, 3));
        data.extend_from_slice(&2u32.to_le_bytes());
        // A discarded entry (padding with a length).
        data.extend_from_slice(&hdr(29, 1));
        data.extend_from_slice(&12u32.to_le_bytes());
        data.extend_from_slice(&[0u8; 8]);
        // Large-form record (type_len 0): irq exit, delta 10.
        let mut exit = vec![0u8; 16];
        exit[..2].copy_from_slice(&10u16.to_le_bytes());
        exit[8..12].copy_from_slice(&24u32.to_le_bytes());
        exit[12..16].copy_from_slice(&1u32.to_le_bytes());
        data.extend_from_slice(&hdr(0, 10));
        data.extend_from_slice(&((exit.len() + 4) as u32).to_le_bytes());
        data.extend_from_slice(&exit);
        // Absolute time stamp, then an unknown record type.
        data.extend_from_slice(&hdr(31, 7));
        data.extend_from_slice(&1u32.to_le_bytes());
        data.extend_from_slice(&hdr(1, 0));
        data.extend_from_slice(&999u32.to_le_bytes());
        let mut page = Vec::new();
        page.extend_from_slice(&1000u64.to_le_bytes());
        page.extend_from_slice(&(data.len() as u64 | 1 << 31).to_le_bytes());
        page.extend_from_slice(&data);
        page.resize(4096, 0);
        let mut out = Vec::new();
        let st = decode_page(&page, &l, &mut out);
        assert!(st.missed);
        assert_eq!(st.other, 1);
        assert_eq!(
            out,
            vec![
                RawEvent::Switch {
                    ts: 1005,
                    prev_tid: 7,
                    prev_state: b'S',
                    next_tid: 9
                },
                RawEvent::IrqExit {
                    ts: 1005 + (2 << 27) + 3 + 10,
                    irq: 24,
                    ret: 1
                },
            ]
        );
    }

    /// A new thread's first wakeup (`sched_wakeup_new`, this machine's format) decodes as a
    /// wakeup: it is where a forked child's first stretch on a CPU begins.
    #[test]
    fn a_first_wakeup_decodes_as_a_wakeup() {
        const NEW: &str = "name: sched_wakeup_new\nID: 373\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;\n\tfield:int target_cpu;\toffset:32;\tsize:4;\tsigned:1;\n";
        let l = Layouts::from_formats(Some(SWITCH), None, None, None, None, None)
            .with_wakeup_new(Some(NEW));
        let mut rec = vec![0u8; 36];
        rec[..2].copy_from_slice(&373u16.to_le_bytes());
        rec[24..28].copy_from_slice(&4242u32.to_le_bytes());
        rec[32..36].copy_from_slice(&1u32.to_le_bytes());
        assert_eq!(
            l.decode(77, &rec),
            Some(RawEvent::Wakeup {
                ts: 77,
                tid: 4242,
                target_cpu: 1
            })
        );
        // Without the format it is some other record.
        let plain = Layouts::from_formats(Some(SWITCH), None, None, None, None, None);
        assert_eq!(plain.decode(77, &rec), None);
    }

    #[test]
    fn garbage_pages_never_panic() {
        let l = Layouts::from_formats(Some(SWITCH), None, None, Some(EXIT), None, None);
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut out = Vec::new();
        for n in [0usize, 3, 15, 16, 17, 100, 4096] {
            for _ in 0..200 {
                let page: Vec<u8> = (0..n)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed as u8
                    })
                    .collect();
                decode_page(&page, &l, &mut out);
            }
        }
    }
}
