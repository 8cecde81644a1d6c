//! `ErrorCode`: every `code` the HTTP API sends in its error body
//! `{"error":{"code","message"}}`, each with its wire string, its HTTP
//! status and its meaning, in one table. The strings are a wire contract
//! (docs/api.md, "Errors"): nothing renames one. `GET /openapi.json` gives
//! `code` as an enum of them, and a test checks the docs' table against
//! this one.

use axum::http::StatusCode;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::{PartialSchema, ToSchema};

/// The table: `Variant = "wire_code", STATUS [OTHER, ...], "meaning";`.
/// The bracketed statuses are the few a code is also sent with (the site
/// says so with `ApiError::with_status`).
macro_rules! error_codes {
    ($($variant:ident = $wire:literal, $status:ident $([$($also:ident),+])?, $meaning:literal;)+) => {
        /// A `code` of the API's error body (docs/api.md, "Errors").
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum ErrorCode {
            $(#[doc = $meaning] $variant,)+
        }

        impl ErrorCode {
            /// Every code, in the table's order.
            pub(crate) const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)+];

            /// The string the API sends.
            pub(crate) const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $wire,)+
                }
            }

            /// The status the code is sent with.
            pub(crate) const fn status(self) -> StatusCode {
                match self {
                    $(ErrorCode::$variant => StatusCode::$status,)+
                }
            }

            /// Other statuses a few sites send the code with (most: none).
            pub(crate) const fn also(self) -> &'static [StatusCode] {
                match self {
                    $(ErrorCode::$variant => &[$($(StatusCode::$also),+)?],)+
                }
            }

            /// What the code means, in one line.
            pub(crate) const fn meaning(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $meaning,)+
                }
            }
        }
    };
}

error_codes! {
    // 400: the request cannot be read.
    BadRequest = "bad_request", BAD_REQUEST, "The request cannot be read (malformed JSON, a path that does not parse).";
    BadMultipart = "bad_multipart", BAD_REQUEST, "`POST /deployments`: not a readable multipart body, an unexpected part, or a part missing.";
    InvalidQuery = "invalid_query", BAD_REQUEST, "The query string has an unknown parameter or a value that is not one.";
    InvalidPath = "invalid_path", BAD_REQUEST, "The path holds a NUL character.";
    InvalidIdempotencyKey = "invalid_idempotency_key", BAD_REQUEST, "The `Idempotency-Key` header is malformed or given twice.";
    UnknownEventId = "unknown_event_id", BAD_REQUEST, "The event id to resume from is not one of the stream's.";
    // 401: who is asking is not known.
    Unauthorized = "unauthorized", UNAUTHORIZED, "Missing or invalid API key or stream token.";
    EndUserTokenRequired = "end_user_token_required", UNAUTHORIZED, "The app's sessions need an end-user token, not a bare invocation key.";
    TokenForAnotherApp = "token_for_another_app", UNAUTHORIZED, "The end-user token is for another app.";
    MalformedToken = "malformed_token", UNAUTHORIZED, "The end-user token is not a token.";
    UnsupportedAlgorithm = "unsupported_algorithm", UNAUTHORIZED, "The end-user JWT is signed with an algorithm not accepted.";
    UnknownKey = "unknown_key", UNAUTHORIZED, "The end-user JWT names no key of the app's JWKS.";
    InvalidSignature = "invalid_signature", UNAUTHORIZED, "The end-user token's signature does not verify.";
    TokenExpired = "token_expired", UNAUTHORIZED, "The end-user token has expired.";
    TokenNotYetValid = "token_not_yet_valid", UNAUTHORIZED, "The end-user JWT is not valid yet (`nbf`).";
    WrongIssuer = "wrong_issuer", UNAUTHORIZED, "The end-user JWT's issuer is no app's identity provider.";
    WrongAudience = "wrong_audience", UNAUTHORIZED, "The end-user JWT's audience is no app of its issuer.";
    TokenRevoked = "token_revoked", UNAUTHORIZED, "The end-user token was issued before the user's revocation.";
    InvalidJwksUrl = "invalid_jwks_url", UNAUTHORIZED, "The app's JWKS URL is refused by this host's settings, so no end-user JWT of the app verifies.";
    // 403: known, but not allowed.
    Forbidden = "forbidden", FORBIDDEN, "The credential may not do this (a platform key is needed, or it is another user's).";
    OriginNotAllowed = "origin_not_allowed", FORBIDDEN, "`POST /mcp` from a browser `Origin` not allowed (`--cors-origin`).";
    SchedulesNotAllowed = "schedules_not_allowed", FORBIDDEN, "An end user's schedule request where the app does not say `[end_users] schedules = true`.";
    CronNotAllowed = "cron_not_allowed", FORBIDDEN, "An end user's recurring (`cron`) schedule: end users set one-shot `at` schedules only.";
    ScheduleNotDeletable = "schedule_not_deletable", FORBIDDEN, "An end user deleting a schedule the agent or a platform key made.";
    // 404: no such thing (or not visible to this credential).
    NotFound = "not_found", NOT_FOUND, "No such endpoint, or no such resource of a kind without its own code.";
    AppNotFound = "app_not_found", NOT_FOUND, "No such app, or not one this credential may reach.";
    SessionNotFound = "session_not_found", NOT_FOUND, "No such session, or not one this credential may reach.";
    DeploymentNotFound = "deployment_not_found", NOT_FOUND, "No such deployment.";
    RouteNotFound = "route_not_found", NOT_FOUND, "The app's deployment does not serve that route.";
    ScheduleNotFound = "schedule_not_found", NOT_FOUND, "No such schedule (it fired, was deleted or never existed).";
    // 405, 408
    MethodNotAllowed = "method_not_allowed", METHOD_NOT_ALLOWED, "The path exists, but not with that method.";
    RequestTimeout = "request_timeout", REQUEST_TIMEOUT, "The request body did not arrive in time.";
    // 409: the current state refuses it.
    Conflict = "conflict", CONFLICT, "The request conflicts with the current state.";
    JournalFull = "journal_full", CONFLICT, "The session's journal is at its cap: it takes no more input.";
    // 410
    Expired = "expired", GONE, "The decision link's approval deadline has passed.";
    // 413, 415
    PayloadTooLarge = "payload_too_large", PAYLOAD_TOO_LARGE, "The body exceeds its limit.";
    UnsupportedMediaType = "unsupported_media_type", UNSUPPORTED_MEDIA_TYPE, "A JSON endpoint called without `Content-Type: application/json`.";
    // 422: well-formed, but refused.
    InvalidBody = "invalid_body", UNPROCESSABLE_ENTITY [BAD_REQUEST, PAYLOAD_TOO_LARGE], "The body has the wrong shape or a value out of range (`POST /mcp`: not JSON-RPC, 400; over the body limit, 413).";
    Unstorable = "unstorable", UNPROCESSABLE_ENTITY, "Text the database cannot store.";
    InvalidManifest = "invalid_manifest", UNPROCESSABLE_ENTITY, "The deployment's manifest is refused.";
    InvalidApprovalPolicy = "invalid_approval_policy", UNPROCESSABLE_ENTITY, "The deployment's `approval_policy` is not a JSON array of tool names.";
    InvalidArguments = "invalid_arguments", UNPROCESSABLE_ENTITY, "Edited tool arguments do not match the tool's JSON Schema.";
    Rejected = "rejected", UNPROCESSABLE_ENTITY, "Refused against stored state.";
    IdempotencyKeyReused = "idempotency_key_reused", UNPROCESSABLE_ENTITY, "The `Idempotency-Key` was first used on another request.";
    InvalidUrl = "invalid_url", UNPROCESSABLE_ENTITY, "A webhook's URL is not `https` to a public address.";
    InvalidSecretName = "invalid_secret_name", UNPROCESSABLE_ENTITY, "Not a secret name.";
    InvalidUser = "invalid_user", UNPROCESSABLE_ENTITY, "Not an end user's id.";
    GuessableName = "guessable_name", UNPROCESSABLE_ENTITY, "A guessable thread id or `Idempotency-Key` sent with a bare invocation key.";
    NoUserMessage = "no_user_message", UNPROCESSABLE_ENTITY, "An AG-UI run's `messages` hold no user message with text.";
    InvalidSchedule = "invalid_schedule", UNPROCESSABLE_ENTITY, "A schedule's times, pattern, zone or route are refused.";
    // 429: too many, for now.
    RateLimited = "rate_limited", TOO_MANY_REQUESTS, "The key is over its request rate: retry after `Retry-After`.";
    TooManyAuthFailures = "too_many_auth_failures", TOO_MANY_REQUESTS, "The address failed authentication too often this minute.";
    QueueFull = "queue_full", TOO_MANY_REQUESTS, "The session's input queue is full.";
    TooManyStreams = "too_many_streams", TOO_MANY_REQUESTS, "The key or end user holds its cap of open streams.";
    TooManySchedules = "too_many_schedules", TOO_MANY_REQUESTS, "The session or app holds its cap of schedules.";
    QuotaExceeded = "quota_exceeded", TOO_MANY_REQUESTS, "The app or end user is at a cap.";
    // 5xx: the server's side (details are logged, not sent).
    Internal = "internal", INTERNAL_SERVER_ERROR, "A server-side failure.";
    Unavailable = "unavailable", SERVICE_UNAVAILABLE, "The server cannot write to its storage.";
    Overloaded = "overloaded", SERVICE_UNAVAILABLE, "Too many turns wait for a slot on this host: retry shortly.";
    ShuttingDown = "shutting_down", SERVICE_UNAVAILABLE, "The server is shutting down: retry in a moment.";
    JwksUnavailable = "jwks_unavailable", SERVICE_UNAVAILABLE, "The app's identity provider cannot be reached to check the token.";
}

/// In the OpenAPI document: a string, one of the codes, each listed with
/// its status and meaning.
impl PartialSchema for ErrorCode {
    fn schema() -> RefOr<Schema> {
        let mut description = String::from(
            "A stable code for programs (docs/api.md, \"Errors\"); new codes may be added, so a client treats an unknown one by its status.",
        );
        for code in ErrorCode::ALL {
            description.push_str(&format!(
                "\n- `{}` ({}): {}",
                code.as_str(),
                code.status().as_u16(),
                code.meaning()
            ));
        }
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(ErrorCode::ALL.iter().map(|code| code.as_str())))
            .description(Some(description))
            .into()
    }
}

impl ToSchema for ErrorCode {}

#[cfg(test)]
#[path = "error_code_tests.rs"]
mod tests;
