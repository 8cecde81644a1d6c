//! The HTTP API (axum): the router built from the endpoint table
//! (`table.rs`), auth, errors, logging; the typed bodies (`views.rs`) and
//! the OpenAPI document made from both (`openapi.rs`); the AG-UI binding
//! (`agui/`).
//!
//! Only this module knows axum. Handlers translate HTTP to calls on the
//! store, the writer, the runtime and the builder, and back.

mod agui;
mod app_schedules;
mod approval_feed;
mod approvals;
mod apps;
mod caller;
mod console;
mod controls;
mod decision_details;
mod decision_links;
mod decision_page;
mod deployments;
mod end_user_schedules;
mod end_users;
mod error;
mod error_code;
pub(crate) mod events;
mod extract;
#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod guest_journal_tests;
pub(crate) mod health;
mod idempotency;
mod keys;
mod layers;
mod mcp;
mod openapi;
mod paging;
mod schedules;
mod secrets;
mod serve;
mod sessions;
mod table;
mod turns;
pub(crate) mod views;
mod webhook_views;
mod webhooks;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, HeaderValue, Method, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use tokio::sync::watch;
use tower_http::cors::{AllowOrigin, CorsLayer};

pub(crate) use error::ApiError;
pub(crate) use error_code::ErrorCode;
pub(crate) use layers::limits::ApiLimits;
pub(crate) use layers::{
    auth, auth_throttle, body_timeout, client_addr, limits, overload, rate_limit, stream_caps,
};
pub use table::endpoints;
#[cfg(test)]
pub(crate) use table::openapi_document;
use table::table;

use crate::build::Builder;
use crate::end_users::EndUsers;
use crate::keys::Keys;
use crate::runtime::Runtime;
use crate::secrets::Vault;
use crate::store::{Db, WriterHandle};
use crate::tokens::StreamTokens;

/// Largest request body of the JSON endpoints.
pub(crate) const JSON_BODY_LIMIT: usize = 1 << 20;
/// Largest `POST /deployments` body (the bundle and the manifest).
pub(crate) const BUNDLE_BODY_LIMIT: usize = 128 << 20;

/// What every handler can reach.
pub(crate) struct Services {
    pub store: Db,
    pub writer: WriterHandle,
    pub runtime: Arc<Runtime>,
    pub builder: Builder,
    pub keys: Keys,
    pub vault: Arc<Vault>,
    pub tokens: StreamTokens,
    /// End-user tokens (`end_users`).
    pub end_users: EndUsers,
    /// Becomes `true` when the server shuts down: open streams end.
    pub shutdown: watch::Receiver<bool>,
    /// Origins allowed to call the API from a browser.
    pub cors_origins: Vec<String>,
    /// The per-key rate limit's buckets.
    pub rate_limit: rate_limit::KeyLimiter,
    /// The event streams open per key and per end user, and their caps.
    pub streams: stream_caps::StreamSlots,
    /// How long a body may take, how large the approvals snapshot is.
    pub limits: ApiLimits,
    /// Failed authentications per source address.
    pub auth_throttle: auth_throttle::AuthThrottle,
    /// The reverse proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: client_addr::TrustedProxies,
    /// `/readyz`'s cached probe of the store.
    pub ready: health::ReadyProbe,
    /// The webhook settings (URL checks).
    pub webhooks: crate::webhooks::WebhookOptions,
    /// Signs and checks webhook decision links.
    pub links_key: [u8; 32],
}

pub(crate) type AppState = Arc<Services>;

/// Who may call an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No key (health checks).
    Public,
    /// A platform key.
    Platform,
    /// A platform key, an invocation key of the session's app, or an end
    /// user of that app (their own sessions).
    Session,
    /// A platform key, or an end-user token (what is their own): not a bare
    /// invocation key, whose holders are all of an app's end users.
    EndUser,
    /// As `Session`, or a stream token of the session (`?token=`): the event stream.
    SessionStream,
}

/// One endpoint: its method, path, access and the layers it goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub method: &'static str,
    pub path: &'static str,
    pub access: Access,
    /// The middleware the row declares (`layers/`): the router and the
    /// OpenAPI document read them here, never from the path.
    pub layers: Layers,
}

/// The layers a row of the endpoint table goes through besides its access
/// check. A row starts from `Layers::of(access)` and says what it adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layers {
    /// Whether it starts turns, and so meets the turn queue's bound
    /// (`layers/overload.rs`).
    pub turns: TurnStart,
    /// It answers with an event stream: the cap on open streams applies
    /// (`layers/stream_caps.rs`).
    pub streams: bool,
    /// Its rate class (`layers/rate_limit.rs`).
    pub rate: RateClass,
    /// A browser's `Origin` is checked before everything (MCP, docs/mcp.md).
    pub checks_origin: bool,
}

/// Whether an endpoint starts turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStart {
    /// Never: no queue bound.
    Never,
    /// Every request may start one: the queue bound refuses it before the
    /// handler runs.
    Always,
    /// Only some of its messages start one (`POST /mcp`: `tools/call`, not
    /// `initialize` or `tools/list`): the handler asks the queue bound
    /// (`overload::overloaded`) for those, so a busy host still lists tools.
    PerMessage,
}

/// Whose bucket a request takes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateClass {
    /// The caller's per-key bucket (`--rate-limit`, `--invocation-rate-limit`).
    PerKey,
    /// None: public endpoints, and `GET /metrics` (a scraper's gaps would
    /// hide the very refusals it counts).
    Unlimited,
}

impl Layers {
    /// What every row of this access gets: the per-key rate limit once a key
    /// is named (opening an event stream counts as one request), nothing else.
    pub(crate) const fn of(access: Access) -> Layers {
        Layers {
            turns: TurnStart::Never,
            streams: false,
            rate: match access {
                Access::Public => RateClass::Unlimited,
                _ => RateClass::PerKey,
            },
            checks_origin: false,
        }
    }

    /// It starts a turn with every request.
    pub(crate) const fn starting_turns(self) -> Layers {
        Layers {
            turns: TurnStart::Always,
            ..self
        }
    }

    /// Some of its messages start a turn; the handler asks the bound for them.
    pub(crate) const fn starting_turns_per_message(self) -> Layers {
        Layers {
            turns: TurnStart::PerMessage,
            ..self
        }
    }

    /// It answers with an event stream.
    pub(crate) const fn streaming(self) -> Layers {
        Layers {
            streams: true,
            ..self
        }
    }

    /// No rate limit.
    pub(crate) const fn unlimited(self) -> Layers {
        Layers {
            rate: RateClass::Unlimited,
            ..self
        }
    }

    /// A browser's `Origin` is checked first.
    pub(crate) const fn checking_origin(self) -> Layers {
        Layers {
            checks_origin: true,
            ..self
        }
    }
}

/// One middleware of a row, as `plan` lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layer {
    Origin,
    Auth(Access),
    RateLimit,
    QueueBound,
    StreamCap,
}

/// The middleware a row goes through, first to last, read from its row
/// alone: the Origin check, auth, the rate limit, the queue bound, the
/// stream cap.
fn plan(endpoint: &Endpoint) -> Vec<Layer> {
    let layers = endpoint.layers;
    let mut plan = Vec::new();
    if layers.checks_origin {
        plan.push(Layer::Origin);
    }
    if endpoint.access != Access::Public {
        plan.push(Layer::Auth(endpoint.access));
    }
    if layers.rate == RateClass::PerKey {
        plan.push(Layer::RateLimit);
    }
    if layers.turns == TurnStart::Always {
        plan.push(Layer::QueueBound);
    }
    if layers.streams {
        plan.push(Layer::StreamCap);
    }
    plan
}

/// The router: every endpoint of `table`, each behind the layers its row
/// declares (`plan`).
pub(crate) fn router(state: AppState) -> Router {
    let mut router = Router::new();
    for (endpoint, _, handler) in table() {
        // The layer added last runs first: `plan`'s first goes on last.
        let handler =
            plan(&endpoint)
                .into_iter()
                .rev()
                .fold(handler, |handler, layer| {
                    let state = state.clone();
                    match layer {
                        Layer::Origin => {
                            handler.route_layer(middleware::from_fn_with_state(state, mcp::origin))
                        }
                        Layer::Auth(access) => handler.route_layer(middleware::from_fn_with_state(
                            (state, access),
                            auth::require_key,
                        )),
                        Layer::RateLimit => handler
                            .route_layer(middleware::from_fn_with_state(state, rate_limit::limit)),
                        Layer::QueueBound => handler
                            .route_layer(middleware::from_fn_with_state(state, overload::refuse)),
                        Layer::StreamCap => handler
                            .route_layer(middleware::from_fn_with_state(state, stream_caps::cap)),
                    }
                });
        router = router.route(endpoint.path, handler);
    }
    if idempotency::exit_after_commit_suffix().is_some() {
        router = router.layer(middleware::from_fn(idempotency::exit_after_commit));
    }
    let cors = cors(&state.cors_origins);
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(JSON_BODY_LIMIT))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            body_timeout::limit,
        ))
        .layer(middleware::from_fn(log_request))
        .layer(cors)
        .with_state(state)
}

/// CORS for browser clients on other origins: preflights allow
/// `Authorization`, `Content-Type`, `Last-Event-ID`, `Idempotency-Key` and
/// `MCP-Protocol-Version`. No origin is allowed
/// unless configured (`--cors-origin`); `*` allows any.
fn cors(origins: &[String]) -> CorsLayer {
    let allow_origin = if origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o.trim()).ok()),
        )
    };
    CorsLayer::new()
        .allow_origin(allow_origin)
        .allow_methods([
            Method::GET,
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            HeaderName::from_static("last-event-id"),
            idempotency::HEADER,
            // A browser's MCP client sends it on every request (docs/mcp.md).
            HeaderName::from_static("mcp-protocol-version"),
        ])
        .max_age(std::time::Duration::from_secs(600))
}

impl Services {
    /// New turns are refused once shutdown began (they would not start).
    pub(crate) fn refuse_if_shutting_down(&self) -> Result<(), ApiError> {
        if *self.shutdown.borrow() {
            return Err(ApiError::new(
                ErrorCode::ShuttingDown,
                "the server is shutting down; retry in a moment",
            ));
        }
        Ok(())
    }
}

async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such endpoint; see docs/api.md")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        "this endpoint does not accept that method; see docs/api.md",
    )
}

/// One log line per request. The query string is left out (it may carry cursors or tokens).
async fn log_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    tracing::info!(
        %method,
        path,
        status = response.status().as_u16(),
        duration_ms = started.elapsed().as_secs_f64() * 1000.0,
        "request"
    );
    response
}

/// Serves the API on `listener` until `shutdown` resolves, then stops
/// accepting and waits for open connections to close (`serve.rs`).
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve::serve(listener, router(state), shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A new turn-starting, streaming row that only says so in its row
    /// (`table::test_turn_row`, at a path no layer has heard of) goes
    /// through the rate limit, the queue bound and the stream cap, and its
    /// document lists the rate limit's 429.
    #[test]
    fn a_new_turn_starting_row_gets_its_layers_from_its_row_alone() {
        let (endpoint, doc, _) = table::test_turn_row();
        assert_eq!(
            plan(&endpoint),
            vec![
                Layer::Auth(Access::Session),
                Layer::RateLimit,
                Layer::QueueBound,
                Layer::StreamCap,
            ]
        );
        let document = openapi::document(&[(endpoint, doc)]);
        let operation = (document.paths.paths.get("/test/turns"))
            .and_then(|item| item.post.as_ref())
            .expect("the test row is documented");
        assert!(operation.responses.responses.contains_key("429"));
    }

    /// The rows declare the layers the paths were matched for before the
    /// rows carried them: behaviour unchanged.
    #[test]
    fn the_table_declares_each_layer_on_the_rows_that_had_it() {
        let rows = endpoints();
        let with = |pick: &dyn Fn(&Endpoint) -> bool| {
            let mut rows: Vec<String> = (rows.iter())
                .filter(|endpoint| pick(endpoint))
                .map(|endpoint| format!("{} {}", endpoint.method, endpoint.path))
                .collect();
            rows.sort();
            rows
        };
        assert_eq!(
            with(&|e| plan(e).contains(&Layer::QueueBound)),
            [
                "POST /ag-ui/{app}/{route}",
                // A link's decision resumes a turn (the review's N11).
                "POST /decision-links",
                "POST /sessions",
                "POST /sessions/{id}/approval",
                "POST /sessions/{id}/input",
            ]
        );
        assert_eq!(
            with(&|e| e.layers.turns == TurnStart::PerMessage),
            ["POST /mcp"]
        );
        assert_eq!(
            with(&|e| plan(e).contains(&Layer::StreamCap)),
            [
                "GET /approvals/events",
                "GET /sessions/{id}/events",
                "POST /ag-ui/{app}/{route}",
                "POST /mcp",
            ]
        );
        assert_eq!(
            with(&|e| plan(e).first() == Some(&Layer::Origin)),
            ["POST /mcp"]
        );
        assert_eq!(
            with(&|e| e.access != Access::Public && !plan(e).contains(&Layer::RateLimit)),
            ["GET /metrics"]
        );
        assert!(
            with(&|e| e.access == Access::Public && plan(e).contains(&Layer::RateLimit)).is_empty()
        );
    }
}
