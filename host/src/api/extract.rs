//! Extractors whose rejections are `ApiError`s (so every error is JSON).

use axum::extract::FromRequest;
use axum::extract::FromRequestParts;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use super::error::ApiError;

/// `axum::Json` with JSON rejections, for bodies that are JSON objects:
/// any other JSON value (an array, which serde would read into a struct
/// field by field) is 422 `invalid_body`.
pub(super) struct Json<T>(pub T);

impl<S, T> FromRequest<S> for Json<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        // Content type, body limit and JSON syntax are checked as axum does.
        let axum::Json(raw) =
            axum::Json::<Box<serde_json::value::RawValue>>::from_request(request, state).await?;
        if !raw.get().trim_start().starts_with('{') {
            return Err(ApiError::unprocessable(
                "invalid_body",
                "the body must be a JSON object",
            ));
        }
        serde_json::from_str(raw.get()).map(Json).map_err(|e| {
            ApiError::unprocessable(
                "invalid_body",
                format!("Failed to deserialize the JSON body into the target type: {e}"),
            )
        })
    }
}

impl<T: serde::Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// `Json` for a body that may be left out: no body at all reads as
/// `T::default()`; a body present is held to `Json`'s rules.
pub(super) struct OptionalJson<T>(pub T);

impl<S, T> FromRequest<S> for OptionalJson<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned + Default,
{
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let headers = request.headers();
        let chunked = headers.contains_key(header::TRANSFER_ENCODING);
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .is_some_and(|length| length.as_bytes() != b"0");
        if !chunked && !declared {
            return Ok(OptionalJson(T::default()));
        }
        let Json(body) = Json::from_request(request, state).await?;
        Ok(OptionalJson(body))
    }
}

/// `axum::extract::Query` with JSON rejections.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub(crate) struct Query<T>(pub T);

/// `axum::extract::Path` with JSON rejections.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub(crate) struct Path<T>(pub T);

/// `axum::extract::Multipart` with JSON rejections.
pub(super) struct Multipart(pub axum::extract::Multipart);

impl<S: Send + Sync> FromRequest<S> for Multipart {
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        axum::extract::Multipart::from_request(request, state)
            .await
            .map(Multipart)
            .map_err(ApiError::from)
    }
}

/// Parses a session id from a path: anything that is not a UUID cannot exist.
pub(super) fn session_id(raw: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(raw)
        .map_err(|_| ApiError::not_found("session_not_found", format!("session `{raw}` not found")))
}
