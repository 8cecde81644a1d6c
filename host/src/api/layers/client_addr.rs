//! The client address of a request: the TCP peer's, or, when the peer is
//! a reverse proxy the operator trusts (`--trusted-proxy <CIDR>`), the
//! right-most address of `X-Forwarded-For` that is not one of those
//! proxies; and the key a bare invocation key's shares are counted under
//! (`share_key`: the address, an IPv6 address by its /64).

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use axum::http::HeaderMap;

use crate::keys::{END_USER_KEY_PREFIX, Keys, Principal};

/// An address block, `203.0.113.0/24` or `2001:db8::/32` (a bare address
/// is its own block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Cidr, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let addr: IpAddr = (addr.trim().parse())
            .map_err(|_| format!("`{text}` is not an address block (`10.0.0.0/8`, `::1/128`)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(prefix) => match prefix.trim().parse::<u8>() {
                Ok(prefix) if prefix <= max => prefix,
                _ => return Err(format!("`{text}`: the prefix length must be 0 to {max}")),
            },
            None => max,
        };
        Ok(Cidr { addr, prefix })
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// `ip` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

impl Cidr {
    /// Whether `ip` is in the block.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (canonical(self.addr), canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

/// The reverse proxies whose `X-Forwarded-For` the server believes
/// (`--trusted-proxy`); none by default: the peer is the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(pub Vec<Cidr>);

/// Hops of `X-Forwarded-For` read at most: a longer header is cut (the
/// right-most, nearest hops are the ones kept).
const MAX_HOPS: usize = 32;

impl TrustedProxies {
    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|cidr| cidr.contains(ip))
    }

    /// The client of a request from `peer` with `headers`: `peer` itself,
    /// unless it is a trusted proxy; then the right-most hop of
    /// `X-Forwarded-For` (every such header, in order) that is not a
    /// trusted proxy. A hop that is not an address ends the walk at the
    /// proxy that reported it, so a forged or garbled header never names
    /// more than the nearest trusted proxy vouches for.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = canonical(peer);
        if self.0.is_empty() || !self.trusts(peer) {
            return peer;
        }
        let hops: Vec<&str> = (headers.get_all("x-forwarded-for").iter())
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .collect();
        let mut client = peer;
        for hop in hops.iter().rev().take(MAX_HOPS) {
            let Ok(ip) = hop.trim().parse::<IpAddr>() else {
                return client;
            };
            client = canonical(ip);
            if !self.trusts(client) {
                return client;
            }
        }
        client
    }
}

/// The key `ip`'s share is counted under: the address itself, or its /64
/// for IPv6 (one host usually holds a whole /64), as `2001:db8:1:2::/64`.
pub(crate) fn share_key(ip: IpAddr) -> String {
    match canonical(ip) {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            format!("{}/64", std::net::Ipv6Addr::from(bits))
        }
        v4 => v4.to_string(),
    }
}

/// The address a request of `principal` is counted under at the edge
/// (its streams, its rate): a bare invocation key's, or a stream token's
/// minted by one, is its client address's `share_key`, since every visitor
/// of a frontend holds that key. `None` for platform keys and end users,
/// who are counted by themselves.
pub(crate) fn visitor(principal: &Principal, keys: &Keys) -> Option<String> {
    if principal.is_platform() || principal.user.is_some() {
        return None;
    }
    if principal.key_id.starts_with(END_USER_KEY_PREFIX) {
        return None;
    }
    let bare = principal.is_bare_invocation() || keys.is_invocation(&principal.key_id);
    principal.source.filter(|_| bare).map(share_key)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn forwarded(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append("x-forwarded-for", HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[test]
    fn blocks_parse_and_contain() {
        let net: Cidr = "10.1.0.0/16".parse().unwrap();
        assert!(net.contains(ip("10.1.200.3")));
        assert!(net.contains(ip("::ffff:10.1.0.9")));
        assert!(!net.contains(ip("10.2.0.1")));
        let one: Cidr = "127.0.0.1".parse().unwrap();
        assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains(ip("203.0.113.9")) && !all.contains(ip("::1")));
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:ffff::1")) && !v6.contains(ip("2001:db9::1")));
        for bad in ["", "10.0.0.0/33", "::/129", "example.com/8", "10.0.0.0/x"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_client_is_the_right_most_untrusted_hop_behind_a_trusted_peer() {
        let none = TrustedProxies::default();
        let headers = forwarded(&["198.51.100.7"]);
        assert_eq!(none.client(ip("127.0.0.1"), &headers), ip("127.0.0.1"));
        let proxies = TrustedProxies(vec!["10.0.0.0/8".parse().unwrap()]);
        // A peer that is not a proxy is the client, whatever it says.
        assert_eq!(proxies.client(ip("192.0.2.1"), &headers), ip("192.0.2.1"));
        // The client prepends a forged hop; the proxies append theirs.
        let headers = forwarded(&["6.6.6.6, 198.51.100.7", "10.0.0.3"]);
        assert_eq!(proxies.client(ip("10.0.0.2"), &headers), ip("198.51.100.7"));
        // Garbage ends the walk at the proxy that reported it.
        let headers = forwarded(&["198.51.100.7, nonsense, 10.0.0.3"]);
        assert_eq!(proxies.client(ip("10.0.0.2"), &headers), ip("10.0.0.3"));
        // No header: the proxy itself.
        assert_eq!(
            proxies.client(ip("10.0.0.2"), &HeaderMap::new()),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn an_ipv6_address_shares_its_64() {
        assert_eq!(share_key(ip("203.0.113.9")), "203.0.113.9");
        assert_eq!(share_key(ip("::ffff:203.0.113.9")), "203.0.113.9");
        assert_eq!(
            share_key(ip("2001:db8:1:2:aaaa::1")),
            share_key(ip("2001:db8:1:2:bbbb::2"))
        );
        assert_eq!(share_key(ip("2001:db8:1:2:aaaa::1")), "2001:db8:1:2::/64");
    }
}
