//! The host's own outbound clients (the JWKS fetch, webhook deliveries):
//! a reqwest resolver that gives public addresses only, so a host name is
//! checked when it resolves and the connection goes to the very addresses
//! that were checked (a DNS answer cannot change in between). The address
//! rule is the guests' too (`non_public_address`).

use std::net::SocketAddr;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::non_public_address;

/// Resolves a host name to its public addresses only; a refusal names
/// `flag`, the operator's way to allow the others.
pub(crate) struct PublicOnly {
    pub flag: &'static str,
}

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        let flag = self.flag;
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let (public, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
                (addrs.into_iter()).partition(|addr| non_public_address(addr.ip()).is_none());
            if public.is_empty() {
                let why = match refused.first() {
                    Some(addr) => format!(
                        "{host} resolves to {} address {}; the operator's {flag} allows those",
                        non_public_address(addr.ip()).unwrap_or("a non-public"),
                        addr.ip()
                    ),
                    None => format!("{host} resolves to no address"),
                };
                return Err(why.into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}
