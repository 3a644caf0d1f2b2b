//! Which `Host` a local HTTP front end (the inspector, `mnemo mcp --http`)
//! answers to, against DNS rebinding and forged hosts: a loopback name
//! only from a loopback peer (a remote client that sends `Host:
//! 127.0.0.1` is lying), any other name only when the operator listed it.
//! Pure: no I/O, nothing of the daemon.

use std::net::SocketAddr;

/// The `Host` names a front end accepts besides loopback ones from
/// loopback peers.
#[derive(Debug, Clone, Default)]
pub struct HostPolicy {
    /// `name` or `name:port`, compared without regard to case.
    allowed: Vec<String>,
}

impl HostPolicy {
    /// A policy accepting `allowed` (each `name` or `name:port`).
    pub fn new(allowed: Vec<String>) -> HostPolicy {
        HostPolicy {
            allowed: allowed
                .into_iter()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .collect(),
        }
    }

    /// The listed names.
    pub fn allowed(&self) -> &[String] {
        &self.allowed
    }

    /// Whether a request with `host` from `peer` (unknown: `None`) is
    /// answered: a listed name, or a loopback name from a loopback peer.
    pub fn allows(&self, host: &str, peer: Option<SocketAddr>) -> bool {
        if self.listed(host) {
            return true;
        }
        is_loopback_host(host) && peer.is_some_and(|p| p.ip().is_loopback())
    }

    fn listed(&self, host: &str) -> bool {
        let bare = strip_port(host);
        self.allowed.iter().any(|a| {
            if a.contains(':') && !a.starts_with('[') || a.contains("]:") {
                a.eq_ignore_ascii_case(host)
            } else {
                a.eq_ignore_ascii_case(bare)
            }
        })
    }
}

/// Whether `host` (a `Host` header value, port included or not) names this
/// machine's loopback interface.
pub fn is_loopback_host(host: &str) -> bool {
    let name = strip_port(host);
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let bare = name.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

/// `host` without its `:port`.
pub fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        // [v6]:port
        return match rest.find(']') {
            Some(end) => &host[..end + 2],
            None => host,
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_with_and_without_ports() {
        for h in [
            "localhost",
            "localhost:8787",
            "127.0.0.1",
            "127.0.0.1:8787",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:8787",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "example.org",
            "10.0.0.1:8787",
            "[2001:db8::1]:80",
            "localhost.evil:80",
            "",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn a_loopback_host_from_a_remote_peer_is_forged() {
        let local: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let remote: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        let p = HostPolicy::new(vec!["mnemo.internal".into(), "box:8787".into()]);
        assert!(p.allows("127.0.0.1:8787", Some(local)));
        assert!(!p.allows("127.0.0.1:8787", Some(remote)), "forged");
        assert!(!p.allows("localhost", None));
        assert!(p.allows("mnemo.internal:8787", Some(remote)));
        assert!(p.allows("MNEMO.internal", Some(remote)));
        assert!(p.allows("box:8787", Some(remote)));
        assert!(!p.allows("box:9999", Some(remote)), "the listed port only");
        assert!(!p.allows("evil.example", Some(remote)));
        assert!(!p.allows("evil.example", Some(local)));
    }
}
