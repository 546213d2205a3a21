//! Index snapshots: the built lanes, messages and totals of a session written to a cache
//! directory (`--cache-dir`), so that the next start of `p5 web` reads one file instead of
//! scanning millions of rows through sqlx (≈ 1.2 µs per row here; a 10 M-event session takes
//! seconds to index from SQL, a fraction of a second from its snapshot).
//!
//! A snapshot is named by a hash of the database URL, the session id and a hash of the
//! session's `name`, `events` and `merged_at_wall_ns`: re-merging a session changes the name,
//! and writing a new snapshot removes the session's older ones. Format (little endian): magic `P5WIDX01`, then the
//! sections below; lanes store start, end and category arrays (prefix sums are recomputed).
//! A file that does not decode exactly (truncated, wrong sizes) is ignored and rebuilt; the
//! decoder never trusts a length beyond the bytes left.

use crate::index::{Detail, SensorTotals, SessionIndex, ThreadLanes};
use crate::lod::Lane;
use p5_tracedb::read::{MessageRow, Session};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"P5WIDX02";

/// Where snapshots of one database go.
#[derive(Debug, Clone)]
pub struct Snapshots {
    /// The cache directory.
    pub dir: PathBuf,
    /// The database URL (part of the key; never written into the file).
    pub db_key: String,
}

impl Snapshots {
    /// The snapshot file of a session: `p5-web-<database hash>-s<id>-<version hash>.idx`.
    pub fn path(&self, s: &Session) -> PathBuf {
        let version = format!("{}\0{}\0{}", s.name, s.events, s.merged_at_wall_ns);
        self.dir.join(format!(
            "{}-{:016x}.idx",
            self.prefix(s.id),
            fnv(version.as_bytes())
        ))
    }

    /// The part of the name shared by every version of a session's snapshot.
    fn prefix(&self, session: i64) -> String {
        format!("p5-web-{:016x}-s{session}", fnv(self.db_key.as_bytes()))
    }

    /// Removes the session's snapshots other than `keep` (older merges of it).
    pub fn prune(&self, session: i64, keep: &Path) {
        let prefix = format!("{}-", self.prefix(session));
        let Ok(dir) = std::fs::read_dir(&self.dir) else {
            return;
        };
        for e in dir.flatten() {
            let p = e.path();
            let ours = e
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix));
            if ours && p != keep {
                let _ = std::fs::remove_file(&p);
            }
        }
    }
}

/// FNV-1a, 64 bits.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Writes the snapshot of `ix` to `path` (through a temporary file and a rename).
pub fn write(ix: &SessionIndex, path: &Path) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(1 << 20);
    out.extend_from_slice(MAGIC);
    let mut ids: Vec<i64> = ix.lanes.keys().copied().collect();
    ids.sort_unstable();
    put(&mut out, ids.len() as u64);
    for id in ids {
        let t = &ix.lanes[&id];
        put(&mut out, id as u64);
        lane(&mut out, &t.states);
        put(&mut out, t.levels.len() as u64);
        for l in &t.levels {
            lane(&mut out, l);
        }
        lane(&mut out, &t.sched);
    }
    let mut hosts: Vec<i64> = ix.irqs.keys().copied().collect();
    hosts.sort_unstable();
    put(&mut out, hosts.len() as u64);
    for h in hosts {
        put(&mut out, h as u64);
        lane(&mut out, &ix.irqs[&h]);
    }
    put(&mut out, ix.messages.len() as u64);
    for m in &ix.messages {
        for v in [
            m.id,
            m.bytes,
            m.send_thread,
            m.send_t,
            m.recv_thread,
            m.recv_t,
        ] {
            put(&mut out, v as u64);
        }
        put(&mut out, m.violation as u64);
        put(&mut out, m.send_sensor.map_or(u64::MAX, u64::from));
        put(&mut out, m.recv_sensor.map_or(u64::MAX, u64::from));
    }
    put(&mut out, ix.max_latency as u64);
    put(&mut out, ix.totals.len() as u64);
    for t in &ix.totals {
        put(&mut out, t.count);
        put(&mut out, t.total as u64);
        put(&mut out, t.self_ns as u64);
    }
    let mut edges: Vec<_> = ix.tree.iter().collect();
    edges.sort_unstable_by_key(|(k, _)| **k);
    put(&mut out, edges.len() as u64);
    for (&(p, c), &(n, total)) in edges {
        put(&mut out, ((p as u64) << 32) | c as u64);
        put(&mut out, n);
        put(&mut out, total as u64);
    }
    put(&mut out, ix.dropped_intervals);
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&out)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

fn put(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn lane(out: &mut Vec<u8>, l: &Lane) {
    let (start, end, cat) = l.columns();
    put(out, start.len() as u64);
    for v in start.iter().chain(end) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in cat {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Decodes a snapshot for a session with `sensors` sensors; `None` if it does not fit.
pub fn decode(bytes: &[u8], sensors: usize) -> Option<Detail> {
    let mut r = Reader {
        b: bytes.strip_prefix(MAGIC)?,
    };
    let mut lanes = HashMap::new();
    for _ in 0..r.len(8)? {
        let id = r.u64()? as i64;
        let states = r.lane()?;
        let mut levels = Vec::new();
        for _ in 0..r.len(8)? {
            levels.push(r.lane()?);
        }
        let sched = r.lane()?;
        lanes.insert(
            id,
            ThreadLanes {
                states,
                levels,
                sched,
            },
        );
    }
    let mut irqs = HashMap::new();
    for _ in 0..r.len(8)? {
        let h = r.u64()? as i64;
        irqs.insert(h, r.lane()?);
    }
    let n = r.len(72)?;
    let mut messages = Vec::with_capacity(n);
    let sensor = |v: u64| (v != u64::MAX).then_some(v as u32);
    for _ in 0..n {
        let v: Vec<i64> = (0..6)
            .map(|_| r.u64().map(|x| x as i64))
            .collect::<Option<_>>()?;
        messages.push(MessageRow {
            id: v[0],
            bytes: v[1],
            send_thread: v[2],
            send_t: v[3],
            recv_thread: v[4],
            recv_t: v[5],
            violation: r.u64()? != 0,
            send_sensor: sensor(r.u64()?),
            recv_sensor: sensor(r.u64()?),
        });
    }
    let max_latency = r.u64()? as i64;
    let n = r.len(24)?;
    if n != sensors {
        return None;
    }
    let mut totals = Vec::with_capacity(n);
    for _ in 0..n {
        totals.push(SensorTotals {
            count: r.u64()?,
            total: r.u64()? as i64,
            self_ns: r.u64()? as i64,
        });
    }
    let mut tree = HashMap::new();
    for _ in 0..r.len(24)? {
        let k = r.u64()?;
        tree.insert(((k >> 32) as u32, k as u32), (r.u64()?, r.u64()? as i64));
    }
    let dropped_intervals = r.u64()?;
    // Categories index the sensor list in interval lanes: check them once here.
    let bad = lanes
        .values()
        .flat_map(|t| t.levels.iter())
        .any(|l| l.columns().2.iter().any(|&c| c as usize >= sensors));
    if bad || !r.b.is_empty() {
        return None;
    }
    Some(Detail {
        lanes,
        irqs,
        messages,
        max_latency,
        totals,
        tree,
        dropped_intervals,
    })
}

struct Reader<'a> {
    b: &'a [u8],
}

impl Reader<'_> {
    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.b.split_first_chunk::<8>()?;
        self.b = rest;
        Some(u64::from_le_bytes(*head))
    }

    /// A count of items of at least `size` bytes each that the remaining bytes can hold.
    fn len(&mut self, size: usize) -> Option<usize> {
        let n = usize::try_from(self.u64()?).ok()?;
        (n.checked_mul(size)? <= self.b.len()).then_some(n)
    }

    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = self.b.split_at_checked(n)?;
        self.b = rest;
        Some(head)
    }

    fn lane(&mut self) -> Option<Lane> {
        let n = self.len(20)?;
        let i64s = |b: &[u8]| -> Vec<i64> {
            b.chunks_exact(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect()
        };
        let start = i64s(self.take(n * 8)?);
        let end = i64s(self.take(n * 8)?);
        let cat: Vec<u32> = self
            .take(n * 4)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default()))
            .collect();
        Lane::from_columns(start, end, cat)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_round_trip_and_damage_is_refused() {
        let mut l = Lane::default();
        for k in 0..100 {
            l.push(k * 10, k * 10 + 5, (k % 3) as u32);
        }
        let mut out = MAGIC.to_vec();
        lane(&mut out, &l);
        let mut r = Reader { b: &out[8..] };
        let back = r.lane().unwrap();
        assert_eq!(back.query(0, 1000, 7), l.query(0, 1000, 7));
        assert!(r.b.is_empty());
        // Truncated or absurd lengths decode to None, not a panic or a huge allocation.
        let mut r = Reader {
            b: &out[8..out.len() - 1],
        };
        assert!(r.lane().is_none());
        let mut huge = u64::MAX.to_le_bytes().to_vec();
        huge.extend_from_slice(&[0; 16]);
        assert!(Reader { b: &huge }.lane().is_none());
        assert!(decode(b"P5WIDX00", 0).is_none());
        assert!(decode(&out[..12], 0).is_none());
    }
}
