//! The middleware layers of the API, in the order a request meets them:
//! the body deadline (`body_timeout`, on every request), then per row of the
//! endpoint table (`table.rs`) as the row declares (`Endpoint::layers`): the
//! access check (`auth`, with the throttle on failures, `auth_throttle`;
//! the client's address from `client_addr`), the
//! per-key rate limit (`rate_limit`), the turn queue's bound (`overload`) and
//! the cap on open event streams (`stream_caps`). `limits` holds the
//! operator's settings they read.

pub(crate) mod auth;
pub(crate) mod auth_throttle;
pub(crate) mod body_timeout;
pub(crate) mod client_addr;
pub(crate) mod limits;
pub(crate) mod overload;
pub(crate) mod rate_limit;
pub(crate) mod stream_caps;
