//! `ApiError`: the one error type of the HTTP API, always a JSON body
//! `{"error":{"code","message"}}`. 5xx details are logged, never sent.

use super::views::{ErrorBody, ErrorDetail};
use axum::Json;
use axum::extract::multipart::MultipartError;
use axum::extract::multipart::MultipartRejection;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::store::StoreError;

#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// Seconds for a `Retry-After` header, if the client should wait.
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// The same error, telling the client to retry after `secs` seconds.
    pub(crate) fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    pub(crate) fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub(crate) fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    pub(crate) fn unprocessable(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, code, message)
    }

    /// A server-side failure: the detail goes to the log, the client gets a generic message.
    pub(crate) fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed to handle the request; the failure is logged",
        )
    }

    fn unavailable(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "storage unavailable");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the server cannot write to its storage right now; retry later",
        )
    }

    /// A rejection from one of axum's extractors, with its own status.
    fn rejection(status: StatusCode, text: String) -> Self {
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
            StatusCode::UNPROCESSABLE_ENTITY => "invalid_body",
            StatusCode::NOT_FOUND => "not_found",
            _ if status.is_server_error() => return Self::internal(text),
            _ => "bad_request",
        };
        Self::new(status, code, text)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            (response.headers_mut()).insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(secs),
            );
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::NotFound { what, .. } => {
                let code = match what {
                    "app" => "app_not_found",
                    "session" => "session_not_found",
                    "route" => "route_not_found",
                    "deployment" => "deployment_not_found",
                    "schedule" => "schedule_not_found",
                    _ => "not_found",
                };
                ApiError::not_found(code, err.to_string())
            }
            StoreError::Conflict(message) => {
                ApiError::new(StatusCode::CONFLICT, "conflict", message)
            }
            StoreError::Quota { cap, message } => {
                // Every refusal a client sees passes here, once.
                crate::metrics::get().quota_refusal(cap);
                if cap == "journal_bytes" {
                    // Retrying does not help: the session is full for good.
                    return ApiError::new(StatusCode::CONFLICT, "journal_full", message);
                }
                let code = match cap {
                    "queued_inputs" => "queue_full",
                    "schedules" => "too_many_schedules",
                    _ => "quota_exceeded",
                };
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, code, message)
            }
            StoreError::Throttled {
                cap,
                message,
                retry_after_secs,
            } => {
                crate::metrics::get().quota_refusal(cap);
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "quota_exceeded", message)
                    .retry_after(retry_after_secs)
            }
            StoreError::Rejected(message) => ApiError::unprocessable("rejected", message),
            StoreError::Unstorable(message) => ApiError::unprocessable("unstorable", message),
            StoreError::Forbidden(message) => {
                ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
            }
            StoreError::KeyReused(message) => {
                ApiError::unprocessable("idempotency_key_reused", message)
            }
            StoreError::Storage(_) | StoreError::Unavailable(_) | StoreError::WriterGone => {
                ApiError::unavailable(err)
            }
            StoreError::Corrupt(_) => ApiError::internal(err),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        ApiError::rejection(r.status(), r.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::bad_request("invalid_query", r.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::rejection(r.status(), r.body_text())
    }
}

impl From<MultipartRejection> for ApiError {
    fn from(r: MultipartRejection) -> Self {
        ApiError::bad_request(
            "bad_multipart",
            format!("unreadable multipart body: {}", r.body_text()),
        )
    }
}

impl From<MultipartError> for ApiError {
    fn from(r: MultipartError) -> Self {
        let message = format!("unreadable multipart body: {}", r.body_text());
        match r.status() {
            StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::rejection(StatusCode::PAYLOAD_TOO_LARGE, message)
            }
            _ => ApiError::bad_request("bad_multipart", message),
        }
    }
}
