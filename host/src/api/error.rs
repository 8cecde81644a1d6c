//! `ApiError`: the one error type of the HTTP API, always a JSON body
//! `{"error":{"code","message"}}`, its code an [`ErrorCode`] (which carries
//! the status). 5xx details are logged, never sent. The conversions from
//! the store's, the extractors' and end-user authentication's errors live
//! here.

use super::error_code::ErrorCode;
use super::views::{ErrorBody, ErrorDetail};
use axum::Json;
use axum::extract::multipart::MultipartError;
use axum::extract::multipart::MultipartRejection;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::end_users::EndUserAuthError;
use crate::store::{Cap, Missing, PolicyRefusal, StoreError};

#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    /// Seconds for a `Retry-After` header, if the client should wait.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// The error `code`, with its status.
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::with_status(code, code.status(), message)
    }

    /// The error `code` with another status than its own: one of the few
    /// [`ErrorCode::also`] lists (an extractor's rejection keeps its own).
    pub(crate) fn with_status(
        code: ErrorCode,
        status: StatusCode,
        message: impl Into<String>,
    ) -> Self {
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

    /// A server-side failure: the detail goes to the log, the client gets a generic message.
    pub(crate) fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        Self::new(
            ErrorCode::Internal,
            "the server failed to handle the request; the failure is logged",
        )
    }

    fn unavailable(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "storage unavailable");
        Self::new(
            ErrorCode::Unavailable,
            "the server cannot write to its storage right now; retry later",
        )
    }

    /// A rejection from one of axum's extractors, with its own status.
    fn rejection(status: StatusCode, text: String) -> Self {
        let code = match status {
            StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
            StatusCode::UNPROCESSABLE_ENTITY => ErrorCode::InvalidBody,
            StatusCode::NOT_FOUND => ErrorCode::NotFound,
            _ if status.is_server_error() => return Self::internal(text),
            _ => ErrorCode::BadRequest,
        };
        Self::with_status(code, status, text)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.as_str().to_string(),
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
                    Missing::App => ErrorCode::AppNotFound,
                    Missing::Session => ErrorCode::SessionNotFound,
                    Missing::Route => ErrorCode::RouteNotFound,
                    Missing::Deployment => ErrorCode::DeploymentNotFound,
                    Missing::Schedule => ErrorCode::ScheduleNotFound,
                    Missing::Webhook | Missing::Delivery | Missing::ApiKey | Missing::Secret => {
                        ErrorCode::NotFound
                    }
                };
                ApiError::new(code, err.to_string())
            }
            StoreError::Conflict(message) => ApiError::new(ErrorCode::Conflict, message),
            StoreError::Quota { cap, message } => {
                // Every refusal a client sees passes here, once.
                crate::metrics::get().quota_refusal(cap.as_str());
                let code = match cap {
                    // Retrying does not help: the session is full for good.
                    Cap::JournalBytes => ErrorCode::JournalFull,
                    Cap::QueuedInputs => ErrorCode::QueueFull,
                    Cap::Schedules => ErrorCode::TooManySchedules,
                    Cap::OpenSessions
                    | Cap::RunningTurns
                    | Cap::OpenSessionsPerUser
                    | Cap::OpenSessionsShare
                    | Cap::RunningTurnsShare
                    | Cap::TurnsPerMinutePerUser => ErrorCode::QuotaExceeded,
                };
                ApiError::new(code, message)
            }
            StoreError::Throttled {
                cap,
                message,
                retry_after_secs,
            } => {
                crate::metrics::get().quota_refusal(cap.as_str());
                ApiError::new(ErrorCode::QuotaExceeded, message).retry_after(retry_after_secs)
            }
            StoreError::Rejected(message) => ApiError::new(ErrorCode::Rejected, message),
            StoreError::Unstorable(message) => ApiError::new(ErrorCode::Unstorable, message),
            StoreError::Forbidden(message) => ApiError::new(ErrorCode::Forbidden, message),
            StoreError::Policy(refusal) => {
                let code = match refusal {
                    PolicyRefusal::TokenRequired => ErrorCode::EndUserTokenRequired,
                    PolicyRefusal::SchedulesNotAllowed => ErrorCode::SchedulesNotAllowed,
                    PolicyRefusal::CronNotAllowed => ErrorCode::CronNotAllowed,
                };
                ApiError::new(code, refusal.message())
            }
            StoreError::KeyReused(message) => {
                ApiError::new(ErrorCode::IdempotencyKeyReused, message)
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
        ApiError::new(ErrorCode::InvalidQuery, r.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        ApiError::rejection(r.status(), r.body_text())
    }
}

impl From<MultipartRejection> for ApiError {
    fn from(r: MultipartRejection) -> Self {
        ApiError::new(
            ErrorCode::BadMultipart,
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
            _ => ApiError::new(ErrorCode::BadMultipart, message),
        }
    }
}

/// The code an end user's refused token is answered with (its status:
/// 401, or 503 when the identity provider cannot be reached).
impl From<&EndUserAuthError> for ErrorCode {
    fn from(err: &EndUserAuthError) -> Self {
        match err {
            EndUserAuthError::MalformedToken(_) => ErrorCode::MalformedToken,
            EndUserAuthError::UnsupportedAlgorithm(_) => ErrorCode::UnsupportedAlgorithm,
            EndUserAuthError::UnknownKey { .. } | EndUserAuthError::MissingKeyId => {
                ErrorCode::UnknownKey
            }
            EndUserAuthError::InvalidSignature => ErrorCode::InvalidSignature,
            EndUserAuthError::TokenExpired => ErrorCode::TokenExpired,
            EndUserAuthError::TokenNotYetValid => ErrorCode::TokenNotYetValid,
            EndUserAuthError::WrongIssuer => ErrorCode::WrongIssuer,
            EndUserAuthError::WrongAudience => ErrorCode::WrongAudience,
            EndUserAuthError::TokenRevoked(_) => ErrorCode::TokenRevoked,
            EndUserAuthError::JwksUnavailable(_) => ErrorCode::JwksUnavailable,
            EndUserAuthError::InvalidJwksUrl(_) => ErrorCode::InvalidJwksUrl,
        }
    }
}
