//! Which peers may connect: an allow-list of networks, checked at accept, for the log server
//! and the host agent.
//!
//! Neither server authenticates its peers (see `docs/security.md`): whoever can connect can
//! send a Hello and frames. The allow-list narrows who can connect. It is a comma-separated
//! list of entries:
//!
//! - an address or a network in CIDR form: `10.1.0.0/16`, `192.168.4.7`, `fd00::/8`;
//! - `loopback`: 127.0.0.0/8 and ::1;
//! - `local`: the networks of this host's own interfaces, read again (at most once a second)
//!   when a peer would otherwise be refused, so interfaces that come up later count;
//! - `any`: every peer.
//!
//! The default ([`AllowList::default_for`]) is `loopback` when listening on a loopback
//! address and `loopback,local` otherwise: the hosts of a cluster's own network may send,
//! hosts beyond a router may not unless named. A peer with an IPv4-mapped IPv6 address (a
//! dual-stack listener) is matched as IPv4. A refused peer is closed at accept without a
//! byte read or written, counted, and logged at most once a second.

use ipnet::IpNet;
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the `local` networks may be read again, and refusals logged.
const REFRESH: Duration = Duration::from_secs(1);

/// An allow-list (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AllowList {
    nets: Vec<IpNet>,
    loopback: bool,
    local: bool,
    any: bool,
}

impl FromStr for AllowList {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut list = AllowList::default();
        for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry {
                "any" => list.any = true,
                "loopback" => list.loopback = true,
                "local" => list.local = true,
                _ => {
                    let net = entry
                        .parse::<IpNet>()
                        .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                        .map_err(|_| {
                            format!(
                                "invalid allow-list entry {entry:?}: expected an address, a \
                                 network such as 10.1.0.0/16, loopback, local or any"
                            )
                        })?;
                    list.nets.push(net.trunc());
                }
            }
        }
        if list == AllowList::default() {
            return Err(
                "empty allow-list: name at least one network, loopback, local or any".into(),
            );
        }
        Ok(list)
    }
}

impl fmt::Display for AllowList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts: Vec<String> = Vec::new();
        if self.any {
            parts.push("any".into());
        }
        if self.loopback {
            parts.push("loopback".into());
        }
        if self.local {
            parts.push("local".into());
        }
        parts.extend(self.nets.iter().map(ToString::to_string));
        f.write_str(&parts.join(","))
    }
}

impl AllowList {
    /// Every peer.
    pub fn any() -> Self {
        Self {
            any: true,
            ..Self::default()
        }
    }

    /// The default for a listener on `listen`: loopback only on a loopback address, else
    /// loopback and this host's own networks.
    pub fn default_for(listen: IpAddr) -> Self {
        Self {
            loopback: true,
            local: !canonical(listen).is_loopback(),
            ..Self::default()
        }
    }

    /// Whether `ip` is allowed without looking at the interfaces.
    fn static_match(&self, ip: IpAddr) -> bool {
        self.any || (self.loopback && ip.is_loopback()) || self.nets.iter().any(|n| n.contains(&ip))
    }
}

/// An IPv4-mapped IPv6 address as IPv4; others unchanged.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// An allow-list in use at an accept loop: the list, the cached local networks and the count
/// of refused peers.
#[derive(Debug)]
pub struct Gate {
    list: AllowList,
    local: Mutex<(Option<Instant>, Vec<IpNet>)>,
    refused: AtomicU64,
    logged: Mutex<(Option<Instant>, u64)>,
}

impl Gate {
    /// A gate for `list`.
    pub fn new(list: AllowList) -> Self {
        Self {
            list,
            local: Mutex::new((None, Vec::new())),
            refused: AtomicU64::new(0),
            logged: Mutex::new((None, 0)),
        }
    }

    /// The list in force.
    pub fn list(&self) -> &AllowList {
        &self.list
    }

    /// Whether a peer at `ip` may connect.
    pub fn admits(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        if self.list.static_match(ip) {
            return true;
        }
        if !self.list.local {
            return false;
        }
        let mut local = self.local.lock().unwrap_or_else(|e| e.into_inner());
        if local.1.iter().any(|n| n.contains(&ip)) {
            return true;
        }
        if local.0.is_none_or(|t| t.elapsed() >= REFRESH) {
            *local = (Some(Instant::now()), local_networks());
            return local.1.iter().any(|n| n.contains(&ip));
        }
        false
    }

    /// Peers refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Counts a refused peer; returns the number refused since the last log line if one is
    /// due now (at most one a second).
    pub fn refuse(&self) -> Option<u64> {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let mut l = self.logged.lock().unwrap_or_else(|e| e.into_inner());
        l.1 += 1;
        if l.0.is_some_and(|t| t.elapsed() < REFRESH) {
            return None;
        }
        let n = std::mem::take(&mut l.1);
        l.0 = Some(Instant::now());
        Some(n)
    }
}

/// The networks of this host's interfaces (empty if they cannot be read).
pub fn local_networks() -> Vec<IpNet> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        // SAFETY: address and netmask are null or valid sockaddrs of their family.
        if let (Some(a), Some(m)) = unsafe { (sock_ip(ifa.ifa_addr), sock_ip(ifa.ifa_netmask)) }
            && let Ok(net) = IpNet::with_netmask(a, m)
        {
            out.push(net.trunc());
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// The IP address of a socket address, if it is IPv4 or IPv6.
///
/// # Safety
/// `sa` must be null or point to a valid socket address of the family it names.
unsafe fn sock_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    // SAFETY: per the contract, `sa` is valid and its family says which struct it is.
    unsafe {
        match i32::from((*sa).sa_family) {
            libc::AF_INET => {
                let v4 = &*sa.cast::<libc::sockaddr_in>();
                Some(IpAddr::from(u32::from_be(v4.sin_addr.s_addr).to_be_bytes()))
            }
            libc::AF_INET6 => {
                let v6 = &*sa.cast::<libc::sockaddr_in6>();
                Some(IpAddr::from(v6.sin6_addr.s6_addr))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn parses_entries_and_matches() {
        let l: AllowList = "127.0.0.0/8, 10.1.0.0/16,192.168.4.7,fd00::/8"
            .parse()
            .unwrap();
        let g = Gate::new(l.clone());
        for ok in [
            "127.0.0.1",
            "10.1.200.3",
            "192.168.4.7",
            "fd12::1",
            "::ffff:10.1.0.9",
        ] {
            assert!(g.admits(ip(ok)), "{ok}");
        }
        for no in ["10.2.0.1", "192.168.4.8", "::1", "8.8.8.8"] {
            assert!(!g.admits(ip(no)), "{no}");
        }
        assert_eq!(g.refused(), 0);
        assert_eq!(
            l.to_string(),
            "127.0.0.0/8,10.1.0.0/16,192.168.4.7/32,fd00::/8"
        );
        assert!("10.0.0.0/33".parse::<AllowList>().is_err());
        assert!("example.com".parse::<AllowList>().is_err());
        assert!(" , ".parse::<AllowList>().is_err());
    }

    #[test]
    fn keywords_and_defaults() {
        let any = Gate::new("any".parse().unwrap());
        assert!(any.admits(ip("203.0.113.9")));
        let lo = Gate::new(AllowList::default_for(ip("127.0.0.1")));
        assert!(lo.admits(ip("127.0.0.5")) && lo.admits(ip("::1")));
        assert!(!lo.admits(ip("203.0.113.9")));
        // On a wildcard listener this host's own networks are allowed: every interface
        // address is in one of them.
        let wild = Gate::new(AllowList::default_for(ip("0.0.0.0")));
        let nets = local_networks();
        assert!(nets.iter().any(|n| n.addr().is_loopback()), "{nets:?}");
        for n in &nets {
            assert!(wild.admits(n.addr()), "{n}");
        }
        assert!(!wild.admits(ip("203.0.113.9")));
    }

    #[test]
    fn refusals_are_counted_and_logged_at_most_once_a_second() {
        let g = Gate::new("loopback".parse().unwrap());
        assert_eq!(g.refuse(), Some(1));
        assert_eq!(g.refuse(), None);
        assert_eq!(g.refuse(), None);
        assert_eq!(g.refused(), 3);
    }
}
