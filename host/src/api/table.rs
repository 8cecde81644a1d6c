//! The endpoint table: every route of the API with its access, its
//! handler and its OpenAPI document (`openapi.rs`), in one list that builds
//! the router (`mod.rs`), drives the auth-matrix test and makes
//! `GET /openapi.json`.

use std::sync::OnceLock;

use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, patch, post, put};

use super::openapi::{self, Doc};
use super::{
    Access, AppState, BUNDLE_BODY_LIMIT, Endpoint, Layers, agui, app_schedules, approval_feed,
    approvals, apps, console, controls, decision_links, deployments, end_users, events, health,
    keys, mcp, schedules, secrets, sessions, views, webhooks,
};

/// A row of the table: the endpoint, its document and its handler.
pub(super) type Row = (Endpoint, Doc, MethodRouter<AppState>);

/// A row with the layers of its access (`Layers::of`).
fn row(
    method: &'static str,
    path: &'static str,
    access: Access,
    doc: Doc,
    handler: MethodRouter<AppState>,
) -> Row {
    let layers = Layers::of(access);
    let endpoint = Endpoint {
        method,
        path,
        access,
        layers,
    };
    (endpoint, doc, handler)
}

/// A row with the layers it adds to those of its access: starting turns,
/// streaming, no rate limit, the Origin check (`Layers`).
fn layered(row: Row, add: impl FnOnce(Layers) -> Layers) -> Row {
    let (endpoint, doc, handler) = row;
    let layers = add(endpoint.layers);
    (Endpoint { layers, ..endpoint }, doc, handler)
}

/// A row that exists only in tests: a new endpoint that starts a turn and
/// streams it, declared as every such row is (`mod.rs`'s tests show it gets
/// the queue bound, the stream cap and the rate limit from this alone).
#[cfg(test)]
pub(super) fn test_turn_row() -> Row {
    let doc = Doc::new("A test-only turn", 200, openapi::Reply::AgUiEvents);
    layered(
        row(
            "POST",
            "/test/turns",
            Access::Session,
            doc,
            post(|| async {}),
        ),
        |l| l.starting_turns().streaming(),
    )
}

/// Every endpoint of the API, in one table: the router is built from it,
/// the auth-matrix test runs every row, and each row's `Doc` goes into the
/// OpenAPI document, so no endpoint exists without its row and its document.
/// The web console's files are rows too (`Public`, `console.rs`).
pub(super) fn table() -> Vec<Row> {
    use Access::*;
    use openapi::Query;
    use openapi::{Body, Reply, list, schema};
    const PAGE: &[(&str, &str, Query)] = &[
        ("app", "An app slug or id", Query::Text),
        (
            "limit",
            "Items per page: 1 to 500 (default 50)",
            Query::Limit,
        ),
        (
            "cursor",
            "The next_cursor of the previous page",
            Query::Uuid,
        ),
    ];
    const DELIVERY_PAGE: &[(&str, &str, Query)] = &[
        (
            "limit",
            "Items per page: 1 to 500 (default 50)",
            Query::Limit,
        ),
        (
            "cursor",
            "The next_cursor of the previous page",
            Query::Uuid,
        ),
    ];
    const LINK: &[(&str, &str, Query)] = &[(
        "t",
        "The link's token (from an approval.requested delivery)",
        Query::Text,
    )];
    const SESSIONS_PAGE: &[(&str, &str, Query)] = &[
        ("app", "An app slug or id", Query::Text),
        ("user", "Only this end user's sessions", Query::Text),
        (
            "status",
            "Only sessions in this status",
            Query::OneOf(&["running", "idle", "awaiting_approval", "errored", "ended"]),
        ),
        (
            "limit",
            "Items per page: 1 to 500 (default 50)",
            Query::Limit,
        ),
        (
            "cursor",
            "The next_cursor of the previous page",
            Query::Uuid,
        ),
    ];
    const EVENTS: &[(&str, &str, Query)] = &[
        (
            "token",
            "A stream token, instead of the Authorization header",
            Query::Text,
        ),
        (
            "last_event_id",
            "Resume after this event id (as Last-Event-ID; empty: from the start)",
            Query::EventId,
        ),
        (
            "format",
            "`journal` (the default): the journal's events; `ag-ui`: the same as AG-UI events (docs/ag-ui.md)",
            Query::OneOf(&["journal", "ag-ui"]),
        ),
    ];
    const FEED: &[(&str, &str, Query)] = &[
        ("app", "Only this app's approvals (slug or id)", Query::Text),
        (
            "last_event_id",
            "Resume after this feed id (as Last-Event-ID; empty: from a snapshot)",
            Query::FeedId,
        ),
    ];
    let health = Reply::Json(schema::<views::Health>);
    let session = Reply::Json(schema::<views::SessionView>);
    let deployment = Reply::Json(schema::<views::DeploymentView>);
    let mut rows = vec![
        row(
            "GET",
            "/healthz",
            Public,
            Doc::new("The process answers", 200, health),
            get(health::healthz),
        ),
        row(
            "GET",
            "/readyz",
            Public,
            Doc::new("The server can serve", 200, health).errors(&[503]),
            get(health::readyz),
        ),
        row(
            "GET",
            "/openapi.json",
            Public,
            Doc::new("This document", 200, Reply::Text("application/json")),
            get(openapi_json),
        ),
        layered(
            row(
                "GET",
                "/metrics",
                Platform,
                Doc::new(
                    "OpenMetrics text",
                    200,
                    Reply::Text("application/openmetrics-text"),
                ),
                get(health::metrics),
            ),
            |l| l.unlimited(),
        ),
        layered(
            row(
                "POST",
                "/sessions",
                Session,
                Doc::new(
                    "Create a session; its first turn starts",
                    201,
                    Reply::Json(schema::<views::CreatedSession>),
                )
                .body(Body::Json(schema::<sessions::CreateSession>))
                .errors(&[404, 409])
                .idempotent(),
                post(sessions::create),
            ),
            |l| l.starting_turns(),
        ),
        row(
            "GET",
            "/sessions",
            EndUser,
            Doc::new(
                "List sessions, newest first (an end user: their own)",
                200,
                Reply::Json(schema::<views::SessionPage>),
            )
            .query(SESSIONS_PAGE),
            get(sessions::list),
        ),
        row(
            "GET",
            "/sessions/{id}",
            Session,
            Doc::new("A session", 200, session).errors(&[404]),
            get(sessions::get),
        ),
        layered(
            row(
                "POST",
                "/sessions/{id}/input",
                Session,
                Doc::new(
                    "Send input; a turn starts (or, with `on_busy`, the input waits for its turn)",
                    202,
                    Reply::Json(schema::<views::TurnAccepted>),
                )
                .body(Body::Json(schema::<sessions::PostInput>))
                .errors(&[404, 409])
                .idempotent(),
                post(sessions::input),
            ),
            |l| l.starting_turns(),
        ),
        row(
            "POST",
            "/sessions/{id}/cancel",
            Session,
            Doc::new(
                "Cancel the running turn; answers once it ended (202: not confirmed yet)",
                200,
                session,
            )
            .also(202)
            .errors(&[404, 409]),
            post(controls::cancel),
        ),
        row(
            "POST",
            "/sessions/{id}/end",
            Session,
            Doc::new(
                "End the session (a running turn is cancelled first)",
                200,
                session,
            )
            .body(Body::OptionalJson(schema::<controls::EndSession>))
            .errors(&[404, 409]),
            post(controls::end),
        ),
        row(
            "PATCH",
            "/sessions/{id}",
            Platform,
            Doc::new(
                "Set the session's LLM budget; a session `paused_budget` that it now covers resumes (docs/llm.md)",
                200,
                session,
            )
            .body(Body::Json(schema::<controls::PatchSession>))
            .errors(&[404, 409, 429]),
            patch(controls::patch),
        ),
        row(
            "DELETE",
            "/sessions/{id}",
            Platform,
            Doc::new(
                "Delete the session and its journal (a running turn is cancelled first)",
                204,
                Reply::Empty,
            )
            .errors(&[404, 409]),
            delete(controls::delete),
        ),
        row(
            "POST",
            "/sessions/{id}/schedules",
            EndUser,
            Doc::new(
                "Schedule an input: a turn of the session at `at` (docs/schedules.md; an end user: on their own session, `at` only, where the app allows it)",
                201,
                Reply::Json(schema::<schedules::ScheduleView>),
            )
            .body(Body::Json(schema::<schedules::CreateSchedule>))
            .errors(&[404, 409, 422, 429]),
            post(schedules::create),
        ),
        row(
            "GET",
            "/sessions/{id}/schedules",
            EndUser,
            Doc::new(
                "The session's schedules that have not fired, soonest first (an end user: of their own session, where the app allows it)",
                200,
                Reply::Json(list::<schedules::ScheduleView>),
            )
            .errors(&[404]),
            get(schedules::list),
        ),
        row(
            "DELETE",
            "/sessions/{id}/schedules/{schedule_id}",
            EndUser,
            Doc::new(
                "Delete a schedule that has not fired (an end user: one an end user made, on their own session)",
                204,
                Reply::Empty,
            )
                .errors(&[404]),
            delete(schedules::delete),
        ),
        layered(
            row(
                "GET",
                "/sessions/{id}/events",
                SessionStream,
                Doc::new("The session's events (SSE), resumable", 200, Reply::Events)
                    .empty(&[204])
                    .query(EVENTS)
                    .errors(&[400, 404]),
                get(events::stream),
            ),
            |l| l.streaming(),
        ),
        layered(
            row(
                "POST",
                "/ag-ui/{app}/{route}",
                Session,
                Doc::new(
                    "An AG-UI run on a thread (docs/ag-ui.md): its events (SSE)",
                    200,
                    Reply::AgUiEvents,
                )
                .body(Body::Json(schema::<agui::RunAgentInput>))
                .errors(&[403, 404]),
                post(agui::run),
            ),
            |l| l.starting_turns().streaming(),
        ),
        layered(
            row(
                "POST",
                "/mcp",
                Session,
                Doc::new(
                    "MCP over Streamable HTTP (docs/mcp.md): each app route is a tool; 202 for a notification",
                    200,
                    Reply::Mcp,
                )
                .body(Body::Json(mcp::message_schema))
                .empty(&[202])
                .errors(&[403]),
                post(mcp::post),
            ),
            |l| l.starting_turns_per_message().streaming().checking_origin(),
        ),
        layered(
            row(
                "POST",
                "/sessions/{id}/approval",
                EndUser,
                Doc::new(
                    "Decide the pending gated call (an end user: of their own session, where its tool says approver = \"end_user\")",
                    202,
                    Reply::Json(schema::<views::DecisionAccepted>),
                )
                .body(Body::Json(schema::<approvals::DecideBody>))
                .errors(&[404, 409])
                .idempotent(),
                post(approvals::decide),
            ),
            |l| l.starting_turns(),
        ),
        row(
            "GET",
            "/approvals",
            Platform,
            Doc::new(
                "Pending approvals across apps",
                200,
                Reply::Json(schema::<views::ApprovalPage>),
            )
            .query(PAGE),
            get(approvals::list),
        ),
        layered(
            row(
                "GET",
                "/approvals/events",
                Platform,
                Doc::new(
                    "Approvals as they become pending, are decided or are withdrawn (SSE), resumable",
                    200,
                    Reply::ApprovalFeed,
                )
                .query(FEED)
                .errors(&[400, 404]),
                get(approval_feed::stream),
            ),
            |l| l.streaming(),
        ),
        row(
            "GET",
            "/apps",
            Platform,
            Doc::new("Every app", 200, Reply::Json(list::<views::AppView>)),
            get(apps::list),
        ),
        row(
            "GET",
            "/apps/{id}",
            Platform,
            Doc::new(
                "An app, by id or slug",
                200,
                Reply::Json(schema::<views::AppView>),
            )
            .errors(&[404]),
            get(apps::get),
        ),
        row(
            "POST",
            "/apps/{id}/end-user-tokens",
            Platform,
            Doc::new(
                "Mint an end-user token: the user's own sessions, on every host",
                201,
                Reply::Json(schema::<end_users::EndUserToken>),
            )
            .body(Body::Json(schema::<end_users::MintEndUserToken>))
            .errors(&[404]),
            post(end_users::mint),
        ),
        row(
            "POST",
            "/apps/{id}/schedules",
            Platform,
            Doc::new(
                "Schedule new sessions of the app: one per firing, at `at` or by `cron` (docs/schedules.md)",
                201,
                Reply::Json(schema::<app_schedules::AppScheduleView>),
            )
            .body(Body::Json(schema::<app_schedules::CreateAppSchedule>))
            .errors(&[404, 422, 429]),
            post(app_schedules::create),
        ),
        row(
            "GET",
            "/apps/{id}/schedules",
            Platform,
            Doc::new(
                "The app's schedules, soonest first",
                200,
                Reply::Json(list::<app_schedules::AppScheduleView>),
            )
            .errors(&[404]),
            get(app_schedules::list),
        ),
        row(
            "DELETE",
            "/apps/{id}/schedules/{schedule_id}",
            Platform,
            Doc::new("Delete an app's schedule", 204, Reply::Empty).errors(&[404]),
            delete(app_schedules::delete),
        ),
        row(
            "POST",
            "/apps/{id}/end-users/{user}/revoke",
            Platform,
            Doc::new(
                "Revoke an end user's tokens issued until now, on every host; their streams end",
                200,
                Reply::Json(schema::<end_users::RevokedEndUser>),
            )
            .errors(&[404, 422]),
            post(end_users::revoke),
        ),
        row(
            "GET",
            "/apps/{id}/deployments",
            Platform,
            Doc::new(
                "An app's deployments, newest first",
                200,
                Reply::Json(list::<views::DeploymentView>),
            )
            .errors(&[404]),
            get(deployments::list),
        ),
        row(
            "POST",
            "/deployments",
            Platform,
            Doc::new("Upload a bundle; it builds off-request", 202, deployment)
                .body(Body::Bundle)
                .idempotent(),
            post(deployments::create).layer(DefaultBodyLimit::max(BUNDLE_BODY_LIMIT)),
        ),
        row(
            "POST",
            "/deployments/{id}/activate",
            Platform,
            Doc::new("Make a built deployment current", 202, deployment).errors(&[404, 409]),
            post(deployments::activate),
        ),
        row(
            "GET",
            "/api-keys",
            Platform,
            Doc::new(
                "Every API key (never its secret)",
                200,
                Reply::Json(list::<views::ApiKeyView>),
            ),
            get(keys::list),
        ),
        row(
            "POST",
            "/api-keys",
            Platform,
            Doc::new(
                "Mint a key; its secret is shown once",
                201,
                Reply::Json(schema::<views::MintedKey>),
            )
            .body(Body::Json(schema::<keys::NewKey>))
            .errors(&[404]),
            post(keys::create),
        ),
        row(
            "DELETE",
            "/api-keys/{id}",
            Platform,
            Doc::new("Revoke a key at once", 204, Reply::Empty).errors(&[404, 409]),
            delete(keys::revoke),
        ),
        row(
            "GET",
            "/secrets",
            Platform,
            Doc::new(
                "Every secret's name (never its value)",
                200,
                Reply::Json(list::<views::SecretView>),
            ),
            get(secrets::list),
        ),
        row(
            "PUT",
            "/secrets/{key}",
            Platform,
            Doc::new(
                "Set a secret",
                200,
                Reply::Json(schema::<views::SecretView>),
            )
            .body(Body::Json(schema::<secrets::PutSecret>))
            .also(201),
            put(secrets::put),
        ),
        row(
            "DELETE",
            "/secrets/{key}",
            Platform,
            Doc::new("Delete a secret", 204, Reply::Empty).errors(&[404, 422]),
            delete(secrets::delete),
        ),
        row(
            "POST",
            "/webhooks",
            Platform,
            Doc::new(
                "Add a webhook endpoint; its signing secret is shown once",
                201,
                Reply::Json(schema::<views::CreatedWebhook>),
            )
            .body(Body::Json(schema::<webhooks::NewWebhook>))
            .errors(&[404, 422]),
            post(webhooks::create),
        ),
        row(
            "GET",
            "/webhooks",
            Platform,
            Doc::new(
                "Every webhook endpoint (never its secret)",
                200,
                Reply::Json(list::<views::WebhookView>),
            ),
            get(webhooks::list),
        ),
        row(
            "GET",
            "/webhooks/{id}",
            Platform,
            Doc::new(
                "A webhook endpoint",
                200,
                Reply::Json(schema::<views::WebhookView>),
            )
            .errors(&[404]),
            get(webhooks::show),
        ),
        row(
            "DELETE",
            "/webhooks/{id}",
            Platform,
            Doc::new(
                "Remove a webhook endpoint and its deliveries",
                204,
                Reply::Empty,
            )
            .errors(&[404]),
            delete(webhooks::delete),
        ),
        row(
            "POST",
            "/webhooks/{id}/rotate",
            Platform,
            Doc::new(
                "A new signing secret, shown once; the old one signs too for a grace period",
                200,
                Reply::Json(schema::<views::CreatedWebhook>),
            )
            .body(Body::Json(schema::<webhooks::Rotate>))
            .errors(&[404, 422]),
            post(webhooks::rotate),
        ),
        row(
            "GET",
            "/webhooks/{id}/deliveries",
            Platform,
            Doc::new(
                "An endpoint's deliveries, newest first, with their attempts and answers",
                200,
                Reply::Json(schema::<views::DeliveryPage>),
            )
            .query(DELIVERY_PAGE)
            .errors(&[404]),
            get(webhooks::deliveries),
        ),
        row(
            "POST",
            "/webhooks/{id}/deliveries/{delivery_id}/resend",
            Platform,
            Doc::new(
                "Send a finished delivery again",
                202,
                Reply::Json(schema::<views::DeliveryView>),
            )
            .errors(&[404, 409]),
            post(webhooks::resend),
        ),
        row(
            "GET",
            "/decision-links",
            Public,
            Doc::new(
                "A decision link's confirmation page (decides nothing)",
                200,
                Reply::Text("text/html; charset=utf-8"),
            )
            .query(LINK)
            .errors(&[404, 409, 410]),
            get(decision_links::show),
        ),
        layered(
            row(
                "POST",
                "/decision-links",
                Public,
                Doc::new(
                    "Decide the call a decision link names",
                    200,
                    Reply::Text("text/html; charset=utf-8"),
                )
                .query(LINK)
                .errors(&[400, 404, 409, 410]),
                post(decision_links::decide),
            ),
            // A decision resumes the turn: the queue bound applies (N11).
            |l| l.starting_turns(),
        ),
        row(
            "POST",
            "/sessions/{id}/stream-token",
            Session,
            Doc::new(
                "A stream token for the session's events",
                201,
                Reply::Json(schema::<views::StreamToken>),
            )
            .errors(&[404]),
            post(sessions::stream_token),
        ),
    ];
    // The web console's files: public, they carry no data (docs/console.md).
    rows.extend(console::ASSETS.iter().enumerate().map(|(index, asset)| {
        let serve = move |headers: HeaderMap| async move { console::serve(index, &headers) };
        let doc = Doc::new(
            "A file of the web console",
            200,
            Reply::Text(asset.content_type),
        )
        .empty(&[304]);
        row("GET", asset.path, Public, doc, get(serve))
    }));
    rows
}

/// The endpoint table (without handlers), for documentation and tests.
pub fn endpoints() -> Vec<Endpoint> {
    table()
        .into_iter()
        .map(|(endpoint, _, _)| endpoint)
        .collect()
}

/// The OpenAPI document (`GET /openapi.json`).
pub(crate) fn openapi_document() -> utoipa::openapi::OpenApi {
    let rows: Vec<(Endpoint, Doc)> = (table().into_iter())
        .map(|(endpoint, doc, _)| (endpoint, doc))
        .collect();
    openapi::document(&rows)
}

async fn openapi_json() -> Response {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    let text = DOCUMENT.get_or_init(|| openapi::to_json(&openapi_document()));
    ([(header::CONTENT_TYPE, "application/json")], text.clone()).into_response()
}
