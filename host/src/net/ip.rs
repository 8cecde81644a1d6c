//! Which resolved addresses the host and its guests may reach: the tables below follow the
//! IANA IPv4 and IPv6 Special-Purpose Address Registries (entries marked
//! not globally reachable are refused), plus multicast and the deprecated
//! site-local and 6to4-relay ranges. An IPv6 address that embeds an IPv4
//! one (IPv4-mapped and -compatible, NAT64, 6to4, Teredo) is judged by it.
//! All of it is refused unless the operator allows private addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What a range of addresses is to an outbound request.
#[derive(Debug, Clone, Copy)]
enum Reach {
    /// Globally reachable (an exception inside a refused range).
    Global,
    /// Refused, with the kind reported.
    Not(&'static str),
    /// Judged by the IPv4 address(es) it embeds.
    Embeds(Embedding),
}

/// Where an IPv6 address carries an IPv4 one.
#[derive(Debug, Clone, Copy)]
enum Embedding {
    /// The last 32 bits (IPv4-mapped, IPv4-compatible, NAT64 /96).
    Low32,
    /// 6to4 (RFC 3056): bits 16 to 47.
    SixToFour,
    /// Teredo (RFC 4380): the server's at bits 32 to 63, the client's
    /// inverted in the last 32 bits.
    Teredo,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, reach: Reach) -> (u32, u8, Reach) {
    (Ipv4Addr::new(a, b, c, d).to_bits(), len, reach)
}

/// The IPv4 table, longest prefix wins; anything unlisted is public.
const V4: &[(u32, u8, Reach)] = &[
    v4(0, 0, 0, 0, 8, Reach::Not("unspecified")), // "this network"
    v4(10, 0, 0, 0, 8, Reach::Not("private")),
    v4(100, 64, 0, 0, 10, Reach::Not("shared (carrier-grade NAT)")),
    v4(127, 0, 0, 0, 8, Reach::Not("loopback")),
    v4(169, 254, 0, 0, 16, Reach::Not("link-local")),
    v4(172, 16, 0, 0, 12, Reach::Not("private")),
    v4(192, 0, 0, 0, 24, Reach::Not("reserved (IETF)")),
    v4(192, 0, 0, 9, 32, Reach::Global),  // PCP anycast
    v4(192, 0, 0, 10, 32, Reach::Global), // TURN anycast
    v4(192, 0, 2, 0, 24, Reach::Not("documentation")),
    v4(192, 88, 99, 0, 24, Reach::Not("reserved (6to4 relay)")),
    v4(192, 168, 0, 0, 16, Reach::Not("private")),
    v4(198, 18, 0, 0, 15, Reach::Not("benchmarking")),
    v4(198, 51, 100, 0, 24, Reach::Not("documentation")),
    v4(203, 0, 113, 0, 24, Reach::Not("documentation")),
    v4(224, 0, 0, 0, 4, Reach::Not("multicast or reserved")),
    v4(240, 0, 0, 0, 4, Reach::Not("multicast or reserved")),
];

const fn v6(s: [u16; 8], len: u8, reach: Reach) -> (u128, u8, Reach) {
    let ip = Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]);
    (ip.to_bits(), len, reach)
}

/// The IPv6 table, longest prefix wins; anything unlisted is public.
const V6: &[(u128, u8, Reach)] = &[
    v6([0; 8], 128, Reach::Not("unspecified")),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, Reach::Not("loopback")),
    v6([0; 8], 96, Reach::Embeds(Embedding::Low32)), // IPv4-compatible
    v6(
        [0, 0, 0, 0, 0, 0xffff, 0, 0],
        96,
        Reach::Embeds(Embedding::Low32),
    ),
    v6(
        [0x64, 0xff9b, 0, 0, 0, 0, 0, 0],
        96,
        Reach::Embeds(Embedding::Low32),
    ),
    v6(
        [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        Reach::Not("local-use NAT64"),
    ),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, Reach::Not("discard-only")),
    v6(
        [0x100, 0, 0, 1, 0, 0, 0, 0],
        64,
        Reach::Not("reserved (dummy prefix)"),
    ),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        Reach::Not("reserved (IETF)"),
    ),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        32,
        Reach::Embeds(Embedding::Teredo),
    ),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 1], 128, Reach::Global), // PCP anycast
    v6([0x2001, 1, 0, 0, 0, 0, 0, 2], 128, Reach::Global), // TURN anycast
    v6([0x2001, 1, 0, 0, 0, 0, 0, 3], 128, Reach::Global), // DNS-SD SRP anycast
    v6(
        [0x2001, 2, 0, 0, 0, 0, 0, 0],
        48,
        Reach::Not("benchmarking"),
    ),
    v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32, Reach::Global), // AMT
    v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48, Reach::Global), // AS112-v6
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, Reach::Global), // ORCHIDv2
    v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28, Reach::Global), // Drone Remote ID
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        Reach::Not("documentation"),
    ),
    v6(
        [0x2002, 0, 0, 0, 0, 0, 0, 0],
        16,
        Reach::Embeds(Embedding::SixToFour),
    ),
    v6(
        [0x3fff, 0, 0, 0, 0, 0, 0, 0],
        20,
        Reach::Not("documentation"),
    ),
    v6(
        [0x5f00, 0, 0, 0, 0, 0, 0, 0],
        16,
        Reach::Not("reserved (segment routing)"),
    ),
    v6(
        [0xfc00, 0, 0, 0, 0, 0, 0, 0],
        7,
        Reach::Not("private (unique local)"),
    ),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, Reach::Not("link-local")),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, Reach::Not("site-local")),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, Reach::Not("multicast")),
];

/// The entry of the longest prefix of `table` that holds `bits`.
fn lookup<const BITS: u32, T>(table: &[(T, u8, Reach)], bits: T) -> Option<Reach>
where
    T: Copy + std::ops::Shr<u32, Output = T> + PartialEq,
{
    let prefix = |value: T, len: u8| {
        if u32::from(len) == 0 {
            None
        } else {
            Some(value >> (BITS - u32::from(len)))
        }
    };
    (table.iter())
        .filter(|(net, len, _)| prefix(*net, *len) == prefix(bits, *len))
        .max_by_key(|(_, len, _)| *len)
        .map(|(_, _, reach)| *reach)
}

/// Why an address is not public, or `None` for a public unicast address.
pub(super) fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    match lookup::<32, u32>(V4, ip.to_bits()) {
        Some(Reach::Not(kind)) => Some(kind),
        Some(Reach::Global | Reach::Embeds(_)) | None => None,
    }
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let bits = ip.to_bits();
    match lookup::<128, u128>(V6, bits)? {
        Reach::Global => None,
        Reach::Not(kind) => Some(kind),
        Reach::Embeds(embedding) => {
            let v4s = match embedding {
                Embedding::Low32 => [bits as u32; 2],
                Embedding::SixToFour => [(bits >> 80) as u32; 2],
                Embedding::Teredo => [(bits >> 64) as u32, !(bits as u32)],
            };
            v4s.into_iter()
                .find_map(|v4| non_public_v4(Ipv4Addr::from_bits(v4)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row: an address, and the kind it is refused as (`None`: public).
    const CASES: &[(&str, Option<&str>)] = &[
        // IPv4, the special-purpose registry row by row.
        ("0.0.0.0", Some("unspecified")),
        ("0.1.2.3", Some("unspecified")),
        ("10.1.2.3", Some("private")),
        ("100.64.0.1", Some("shared (carrier-grade NAT)")),
        ("100.127.255.255", Some("shared (carrier-grade NAT)")),
        ("100.128.0.1", None),
        ("127.0.0.1", Some("loopback")),
        ("169.254.169.254", Some("link-local")),
        ("172.16.0.1", Some("private")),
        ("172.31.255.255", Some("private")),
        ("172.32.0.1", None),
        ("192.0.0.1", Some("reserved (IETF)")),
        ("192.0.0.8", Some("reserved (IETF)")),
        ("192.0.0.9", None),
        ("192.0.0.10", None),
        ("192.0.0.170", Some("reserved (IETF)")),
        ("192.0.2.1", Some("documentation")),
        ("192.31.196.1", None),
        ("192.52.193.1", None),
        ("192.88.99.1", Some("reserved (6to4 relay)")),
        ("192.168.1.1", Some("private")),
        ("192.175.48.1", None),
        ("198.18.0.1", Some("benchmarking")),
        ("198.19.255.255", Some("benchmarking")),
        ("198.20.0.1", None),
        ("198.51.100.7", Some("documentation")),
        ("203.0.113.7", Some("documentation")),
        ("224.0.0.1", Some("multicast or reserved")),
        ("239.255.255.255", Some("multicast or reserved")),
        ("240.0.0.1", Some("multicast or reserved")),
        ("255.255.255.255", Some("multicast or reserved")),
        ("8.8.8.8", None),
        ("104.18.6.192", None),
        ("223.255.255.255", None),
        // IPv6.
        ("::", Some("unspecified")),
        ("::1", Some("loopback")),
        ("::ffff:127.0.0.1", Some("loopback")),
        ("::ffff:169.254.169.254", Some("link-local")),
        ("::ffff:8.8.8.8", None),
        ("::10.0.0.1", Some("private")),
        ("64:ff9b::a00:1", Some("private")),
        ("64:ff9b::808:808", None),
        ("64:ff9b:1::a9fe:a9fe", Some("local-use NAT64")),
        ("64:ff9b:1:ffff::808:808", Some("local-use NAT64")),
        ("100::1", Some("discard-only")),
        ("100:0:0:1::1", Some("reserved (dummy prefix)")),
        ("2001:2::1", Some("benchmarking")),
        ("2001:1::1", None),
        ("2001:1::4", Some("reserved (IETF)")),
        ("2001:3::1", None),
        ("2001:4:112::1", None),
        ("2001:10::1", Some("reserved (IETF)")),
        ("2001:20::1", None),
        ("2001:30::1", None),
        ("2001:100::1", Some("reserved (IETF)")),
        ("2001:200::1", None),
        // Teredo: server 65.54.227.120, client 192.168.0.1 (inverted).
        ("2001:0:4136:e378:8000:63bf:3f57:fffe", Some("private")),
        // Server 10.0.0.1, client 8.8.8.8.
        ("2001:0:a00:1:8000:63bf:f7f7:f7f7", Some("private")),
        // Server 65.54.227.120, client 8.8.8.8.
        ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", None),
        ("2001:db8::1", Some("documentation")),
        ("2002:a9fe:a9fe::1", Some("link-local")),
        ("2002:7f00:1::", Some("loopback")),
        ("2002:808:808::1", None),
        ("2606:4700::6812:6c0", None),
        ("2620:4f:8000::1", None),
        ("3fff::1", Some("documentation")),
        ("3fff:fff::1", Some("documentation")),
        ("3fff:1000::1", None),
        ("5f00::1", Some("reserved (segment routing)")),
        ("fc00::1", Some("private (unique local)")),
        ("fd00::1", Some("private (unique local)")),
        ("fe80::1", Some("link-local")),
        ("febf::1", Some("link-local")),
        ("fec0::1", Some("site-local")),
        ("feff::1", Some("site-local")),
        ("ff02::1", Some("multicast")),
    ];

    #[test]
    fn addresses_are_judged_by_the_special_purpose_registries() {
        for (ip, expected) in CASES {
            let parsed: IpAddr = ip.parse().unwrap();
            assert_eq!(non_public(parsed), *expected, "{ip}");
        }
    }
}
