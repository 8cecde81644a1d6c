//! Which resolved addresses a guest may reach: loopback, private, link-local
//! (cloud metadata at 169.254.169.254), shared, multicast and unspecified
//! addresses are refused unless the operator allows private addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not public, or `None` for a public unicast address.
pub(super) fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return non_public_v4(v4);
            }
            non_public_v6(v6)
        }
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (carrier-grade NAT)")
    } else if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("multicast or reserved")
    } else if a == 192 && b == 0 && ip.octets()[2] == 0 {
        Some("reserved (IETF)")
    } else {
        None
    }
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if first & 0xfe00 == 0xfc00 {
        Some("private (unique local)")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if let Some(v4) = ip.to_ipv4() {
        // IPv4-compatible (deprecated) and NAT64 well-known prefixes reach IPv4 space.
        non_public_v4(v4)
    } else if ip.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let s = ip.segments();
        non_public_v4(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ))
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_internal_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(non_public(ip).is_some(), "{ip} counted as public");
        }
    }

    #[test]
    fn allows_public_addresses() {
        for ip in [
            "8.8.8.8",
            "104.18.6.192",
            "2606:4700::6812:6c0",
            "64:ff9b::808:808",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(non_public(ip), None, "{ip}");
        }
    }
}
