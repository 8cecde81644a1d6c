//! Extractors whose rejections are `ApiError`s (so every error is JSON).

use axum::extract::FromRequest;
use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use uuid::Uuid;

use super::error::ApiError;
use crate::api::ErrorCode;

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
            return Err(ApiError::new(
                ErrorCode::InvalidBody,
                "the body must be a JSON object",
            ));
        }
        if crate::util::json_has_nul(raw.get()) {
            return Err(ApiError::new(ErrorCode::InvalidBody, NUL_REFUSED));
        }
        let first = match serde_json::from_str(raw.get()) {
            Ok(body) => return Ok(Json(body)),
            Err(err) => err,
        };
        // JSON Schema's (and so the API document's) `integer` includes a
        // number such as `131.0`, which serde refuses for an integer field:
        // read such numbers as the integers they are, then try again. Only
        // a refused body pays for this.
        if let Ok(mut value) = serde_json::from_str::<serde_json::Value>(raw.get())
            && integral_floats(&mut value)
            && let Ok(body) = serde_json::from_value(value)
        {
            return Ok(Json(body));
        }
        Err(ApiError::new(
            ErrorCode::InvalidBody,
            format!("Failed to deserialize the JSON body into the target type: {first}"),
        ))
    }
}

/// Turns every number in `value` with no fractional part that fits an
/// integer (`131.0`, `-2e3`) into that integer; whether any changed.
pub(super) fn integral_floats(value: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    match value {
        Value::Number(n) if n.is_f64() => {
            let Some(f) = n.as_f64() else { return false };
            let integral = if f.fract() != 0.0 {
                None
            } else if (0.0..=u64::MAX as f64).contains(&f) {
                Some(serde_json::Number::from(f as u64))
            } else if (i64::MIN as f64..0.0).contains(&f) {
                Some(serde_json::Number::from(f as i64))
            } else {
                None
            };
            integral.map(|i| *n = i).is_some()
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |any, v| integral_floats(v) | any),
        Value::Object(fields) => fields
            .values_mut()
            .fold(false, |any, v| integral_floats(v) | any),
        _ => false,
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

/// Why a NUL character is refused wherever a client sends text.
const NUL_REFUSED: &str = "text must not contain the NUL character (U+0000)";

/// `axum::extract::Query` with JSON rejections; a NUL (`%00`) anywhere in
/// the query is `400 invalid_query`.
pub(crate) struct Query<T>(pub T);

impl<S, T> FromRequestParts<S> for Query<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        if query.contains("%00") {
            return Err(ApiError::new(ErrorCode::InvalidQuery, NUL_REFUSED));
        }
        let axum::extract::Query(value) =
            axum::extract::Query::from_request_parts(parts, state).await?;
        Ok(Query(value))
    }
}

/// `axum::extract::Path` with JSON rejections; a NUL (`%00`) in the path is
/// `400 invalid_path`.
pub(crate) struct Path<T>(pub T);

impl<S, T> FromRequestParts<S> for Path<T>
where
    S: Send + Sync,
    T: serde::de::DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        if parts.uri.path().contains("%00") {
            return Err(ApiError::new(ErrorCode::InvalidPath, NUL_REFUSED));
        }
        let axum::extract::Path(value) =
            axum::extract::Path::from_request_parts(parts, state).await?;
        Ok(Path(value))
    }
}

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
    Uuid::parse_str(raw).map_err(|_| {
        ApiError::new(
            ErrorCode::SessionNotFound,
            format!("session `{raw}` not found"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::integral_floats;

    #[test]
    fn integral_numbers_are_read_as_integers_and_no_others() {
        let mut value = serde_json::json!({"ttl": 131.0, "n": [-2.0, 1.5, 7], "s": "3.0"});
        assert!(integral_floats(&mut value));
        assert_eq!(
            value,
            serde_json::json!({"ttl": 131, "n": [-2, 1.5, 7], "s": "3.0"})
        );
        let mut value = serde_json::json!({"f": 0.25, "big": 1e300});
        assert!(!integral_floats(&mut value));
    }
}
