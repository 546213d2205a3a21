//! Metric identities: a dotted name, a unit and a decimal scale, and the stable 64-bit id
//! (FNV-1a of the name) that `Counter` events carry as their sensor.
//!
//! Naming: `<group>.<instance>.<quantity>`, e.g. `cpu.total.busy`, `net.eth0.rx_bytes_total`.
//! Names ending in `_total` are raw cumulative counters since boot (or since the process
//! started) — the merge stage computes rates from consecutive samples; every other name is a
//! gauge sampled at the event's time. A value `v` means `v × 10^scale` in `unit`.

use p5_wire::data::Name;

/// FNV-1a, 64 bit.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The stable id of a metric name (never 0, which means "no sensor").
pub fn metric_id(name: &str) -> u64 {
    fnv1a(name.as_bytes()).max(1)
}

/// One sampled value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Dotted metric name.
    pub name: String,
    /// Unit (`%`, `bytes`, `pages`, `count`, ...).
    pub unit: &'static str,
    /// Decimal exponent: the quantity is `value × 10^scale`.
    pub scale: i32,
    /// The value.
    pub value: i64,
}

impl Sample {
    /// A sample with scale 0.
    pub fn new(name: String, unit: &'static str, value: i64) -> Self {
        Self {
            name,
            unit,
            scale: 0,
            value,
        }
    }

    /// A sample of a fractional quantity, stored in hundredths (scale −2).
    pub fn centi(name: String, unit: &'static str, value: f64) -> Self {
        Self {
            name,
            unit,
            scale: -2,
            value: if value.is_finite() {
                (value * 100.0).round() as i64
            } else {
                0
            },
        }
    }

    /// The `Names` entry declaring this metric.
    pub fn declaration(&self) -> Name {
        Name {
            id: metric_id(&self.name),
            name: self.name.clone(),
            unit: self.unit.to_owned(),
            scale_exp: self.scale,
        }
    }
}

/// Makes an arbitrary label (interface, device, process name) safe as one name component:
/// dots, spaces and control characters become `_`, length is capped.
pub fn component(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c == '.' || c.is_whitespace() || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_fnv1a() {
        // Reference values of FNV-1a 64.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(metric_id("cpu.total.busy"), fnv1a(b"cpu.total.busy"));
        assert_ne!(metric_id("cpu.0.busy"), metric_id("cpu.1.busy"));
    }

    #[test]
    fn centi_and_components() {
        let s = Sample::centi("load.1".into(), "", 1.234);
        assert_eq!((s.value, s.scale), (123, -2));
        assert_eq!(Sample::centi("x".into(), "", f64::NAN).value, 0);
        assert_eq!(component("my.proc name"), "my_proc_name");
        assert_eq!(s.declaration().id, metric_id("load.1"));
    }
}
