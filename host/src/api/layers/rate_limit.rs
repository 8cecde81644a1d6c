//! The per-key rate limit: requests per second with a burst, per API key
//! and per host (a GCRA token bucket, `governor`). Over it a request gets
//! 429 `rate_limited` with `Retry-After`. Opening an event stream counts as
//! one request (its frames do not); `GET /metrics` is not limited
//! (its row's `RateClass::Unlimited`), so a scraper is never refused by it.
//! The bare invocation key (and its stream tokens) gets a bucket per client
//! address (`client_addr::visitor`): every visitor of a frontend holds that
//! key, so one of them cannot spend everyone's rate.

use std::num::NonZeroU32;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::Clock;
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::api::{ApiError, AppState, ErrorCode};
use crate::keys::Principal;

/// Requests per second per platform key unless the operator says otherwise (`--rate-limit`).
pub(crate) const DEFAULT_RATE: u32 = 5000;
/// Requests per second per invocation key, end user or stream token unless
/// the operator says otherwise (`--invocation-rate-limit`): they ship in
/// frontends, so every visitor holds them.
pub(crate) const DEFAULT_INVOCATION_RATE: u32 = 500;

/// The operator's limit (`--rate-limit`, `--rate-limit-burst`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Requests per second a key gets on average.
    pub per_second: NonZeroU32,
    /// Requests a key may send at once after a quiet spell.
    pub burst: NonZeroU32,
}

/// Buckets kept before the idle ones are dropped (at most once a second):
/// the bare key's are per address, so their number is the visitors'.
const MAX_BUCKETS: usize = 65_536;

/// The buckets of one class of principal; `None` when its limit is off.
type Buckets = Option<(RateLimit, DefaultKeyedRateLimiter<String>)>;

fn buckets(limit: Option<RateLimit>) -> Buckets {
    limit.map(|limit| {
        let quota = Quota::per_second(limit.per_second).allow_burst(limit.burst);
        (limit, DefaultKeyedRateLimiter::keyed(quota))
    })
}

/// Each key's bucket on this host: platform keys under `--rate-limit`,
/// everyone else (invocation keys, end users, stream tokens) under
/// `--invocation-rate-limit`.
pub(crate) struct KeyLimiter {
    platform: Buckets,
    invocation: Buckets,
    /// When the invocation buckets were last pruned.
    pruned: Mutex<Instant>,
}

impl KeyLimiter {
    pub(crate) fn new(platform: Option<RateLimit>, invocation: Option<RateLimit>) -> KeyLimiter {
        KeyLimiter {
            platform: buckets(platform),
            invocation: buckets(invocation),
            pruned: Mutex::new(Instant::now()),
        }
    }

    /// Takes one request from the principal's bucket (the bare key's
    /// `visitor` address's own), or says how long until one is there.
    fn check(
        &self,
        principal: &Principal,
        visitor: Option<&str>,
    ) -> Result<(), (RateLimit, Duration)> {
        let class = if principal.is_platform() {
            &self.platform
        } else {
            &self.invocation
        };
        let Some((limit, limiter)) = class else {
            return Ok(());
        };
        let key = match visitor {
            Some(address) => format!("{}@{address}", principal.key_id),
            None => principal.key_id.clone(),
        };
        if visitor.is_some() && limiter.len() > MAX_BUCKETS {
            let mut pruned = self.pruned.lock().unwrap_or_else(PoisonError::into_inner);
            if pruned.elapsed() >= Duration::from_secs(1) {
                // Full buckets are as good as new: dropping them loses nothing.
                limiter.retain_recent();
                *pruned = Instant::now();
            }
        }
        limiter
            .check_key(&key)
            .map_err(|wait| (*limit, wait.wait_time_from(limiter.clock().now())))
    }
}

/// Whose bucket ran dry, for the refusal's message.
fn who(principal: &Principal) -> &'static str {
    if principal
        .key_id
        .starts_with(crate::keys::END_USER_KEY_PREFIX)
    {
        "end user"
    } else {
        "API key"
    }
}

/// The middleware, after `auth::require_key` (which names the key).
pub(crate) async fn limit(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(principal) = request.extensions().get::<Principal>() else {
        return next.run(request).await;
    };
    let visitor = super::client_addr::visitor(principal, &state.keys);
    let Err((limit, wait)) = state.rate_limit.check(principal, visitor.as_deref()) else {
        return next.run(request).await;
    };
    crate::metrics::get().rate_limited.inc();
    // Whole seconds, rounded up: a client that waits that long gets in.
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let seconds = seconds.max(1);
    let mut response = ApiError::new(
        ErrorCode::RateLimited,
        format!(
            "this {} sent more than {} requests per second (burst {}, {}): retry after {seconds} s",
            match &visitor {
                Some(address) => format!("invocation key, from address {address},"),
                None => who(principal).to_string(),
            },
            limit.per_second,
            limit.burst,
            if principal.is_platform() {
                "--rate-limit"
            } else {
                "--invocation-rate-limit"
            }
        ),
    )
    .into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}
