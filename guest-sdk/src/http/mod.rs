//! Outbound HTTP for agents: `Request`, `Response`, `send` and `send_events`
//! (a Server-Sent Events response handed over event by event), with errors
//! that say when the host refused a request.
//!
//! Requests go through `wasi:http/outgoing-handler` (with the `wstd` crate);
//! the host lets them through only to the origins on the deployment's
//! outbound allowlist (`[outbound] allow` in `agenthost.toml`) and journals
//! each one (`HTTP_REQUEST` / `HTTP_RESPONSE`). The calls block until the
//! response has arrived; the turn's wall-clock limit still applies.
//!
//! ```no_run
//! use agenthost_sdk::http::{self, Request};
//!
//! # fn f() -> Result<(), agenthost_sdk::Error> {
//! let response = http::send(Request::get("https://api.example.com/status"))?;
//! if response.status() == 200 {
//!     let text = response.text();
//! #   let _ = text;
//! }
//! # Ok(())
//! # }
//! ```

mod sse;
mod transport;

use std::fmt;

use serde::Serialize;

use crate::error::Error;

pub use sse::SseEvent;

/// An HTTP request to send with [`send`] or [`send_events`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    /// A request with `method` (such as `"GET"`) to `url`, an absolute
    /// `http://` or `https://` URL, without headers or body.
    pub fn new(method: impl Into<String>, url: impl Into<String>) -> Self {
        Request {
            method: method.into(),
            url: url.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A `GET` request to `url`.
    pub fn get(url: impl Into<String>) -> Self {
        Request::new("GET", url)
    }

    /// A `POST` request to `url`.
    pub fn post(url: impl Into<String>) -> Self {
        Request::new("POST", url)
    }

    /// Adds a header (names are case-insensitive; a name may repeat).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the body to `value` as JSON, and the `content-type` header to
    /// `application/json`.
    pub fn json(self, value: &impl Serialize) -> Result<Self, Error> {
        let body = serde_json::to_vec(value)
            .map_err(|e| Error::Other(format!("cannot encode the request body as JSON: {e}")))?;
        Ok(self.header("content-type", "application/json").body(body))
    }

    /// The method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The headers, in the order they were added.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }
}

/// An HTTP response: its status, headers and (for [`send`], or a non-2xx
/// status in [`send_events`]) its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    /// The status code, such as `200`.
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The first value of header `name` (case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every header, names in lowercase.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The body's bytes.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// The body as text (invalid UTF-8 replaced with `U+FFFD`).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A response built by hand, for unit tests.
    #[cfg(test)]
    pub(crate) fn for_tests(status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        Response {
            status,
            headers,
            body,
        }
    }

    /// The body parsed as JSON into `T`.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        serde_json::from_slice(&self.body)
            .map_err(|e| Error::Other(format!("the response body is not the JSON expected: {e}")))
    }
}

/// Why an HTTP request failed. A response with an error status (4xx, 5xx)
/// is not an `HttpError`: it is a [`Response`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The host refused the request: `origin` (`scheme://host[:port]`) is not
    /// on the deployment's outbound allowlist.
    Denied {
        /// The origin the request was for.
        origin: String,
    },
    /// The host refused to connect to the address `origin` resolved to (a
    /// private or loopback address, which deployments may not reach unless
    /// the server allows it).
    AddressProhibited {
        /// The origin the request was for.
        origin: String,
    },
    /// The request cannot be sent as built (a URL that is not absolute
    /// `http(s)`, an invalid header or method...).
    InvalidRequest(String),
    /// The exchange failed: DNS, connection, TLS, a timeout, a response cut
    /// off, an event stream that is not UTF-8...
    Failed {
        /// The origin the request was for.
        origin: String,
        /// What went wrong.
        message: String,
    },
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::Denied { origin } => write!(
                f,
                "the host refused the request to {origin}: it is not on this deployment's \
                 outbound allowlist ([outbound] allow in agenthost.toml)"
            ),
            HttpError::AddressProhibited { origin } => write!(
                f,
                "the host refused to connect to {origin}: it resolves to a private or \
                 loopback address, which this server does not let agents reach"
            ),
            HttpError::InvalidRequest(m) => write!(f, "invalid HTTP request: {m}"),
            HttpError::Failed { origin, message } => {
                write!(f, "the request to {origin} failed: {message}")
            }
        }
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for Error {
    fn from(e: HttpError) -> Self {
        Error::Http(e)
    }
}

/// Sends `request` and returns the response with its whole body.
///
/// Fails with [`Error::Http`] when the request cannot be made (see
/// [`HttpError`]); any status, 4xx and 5xx included, is a `Response`. Do not
/// call it from inside [`send_events`]' callback.
pub fn send(request: Request) -> Result<Response, Error> {
    transport::send(request)
}

/// Sends `request` and reads the response as Server-Sent Events: for a 2xx
/// status, each event that carries data is handed to `on_event` as soon as it
/// has arrived, and the returned `Response` has an empty body; for any other
/// status the body is read whole into the `Response` and `on_event` is never
/// called. An error from `on_event` stops reading and is returned as is.
///
/// Fails with [`Error::Http`] when the request cannot be made or the stream
/// breaks off or is not UTF-8. Do not call [`send`] or `send_events` from
/// inside `on_event`.
pub fn send_events<F>(request: Request, on_event: F) -> Result<Response, Error>
where
    F: FnMut(SseEvent) -> Result<(), Error>,
{
    transport::send_events(request, on_event)
}

/// `scheme://host[:port]` of an absolute `http(s)` URL (the port only when
/// the URL names one), as the outbound allowlist spells origins.
pub(crate) fn origin(url: &str) -> Result<String, HttpError> {
    let uri: wstd::http::Uri = url
        .parse()
        .map_err(|e| HttpError::InvalidRequest(format!("`{url}` is not a URL: {e}")))?;
    let scheme = uri.scheme_str().unwrap_or_default().to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(HttpError::InvalidRequest(format!(
            "`{url}` is not an absolute http:// or https:// URL"
        )));
    }
    let Some(host) = uri.host().filter(|h| !h.is_empty()) else {
        return Err(HttpError::InvalidRequest(format!("`{url}` has no host")));
    };
    let host = host.to_ascii_lowercase();
    Ok(match uri.port_u16() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_keep_scheme_host_and_an_explicit_port() {
        assert_eq!(
            origin("https://api.openai.com/v1/chat/completions").unwrap(),
            "https://api.openai.com"
        );
        assert_eq!(
            origin("http://127.0.0.1:8080/v1?x=1").unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            origin("HTTPS://User@Example.COM:443/").unwrap(),
            "https://example.com:443"
        );
        assert!(matches!(
            origin("api.openai.com/v1"),
            Err(HttpError::InvalidRequest(_))
        ));
        assert!(matches!(
            origin("ftp://example.com/"),
            Err(HttpError::InvalidRequest(_))
        ));
        assert!(matches!(
            origin("not a url"),
            Err(HttpError::InvalidRequest(_))
        ));
    }

    #[test]
    fn a_denied_request_says_which_origin_and_where_to_allow_it() {
        let text = Error::from(HttpError::Denied {
            origin: "https://evil.example".into(),
        })
        .to_string();
        assert_eq!(
            text,
            "the host refused the request to https://evil.example: it is not on this \
             deployment's outbound allowlist ([outbound] allow in agenthost.toml)"
        );
    }

    #[test]
    fn requests_and_responses_read_simply() {
        let request = Request::post("https://x.test/a")
            .header("Authorization", "Bearer k")
            .json(&serde_json::json!({"a": 1}))
            .unwrap();
        assert_eq!(request.method(), "POST");
        assert_eq!(request.url(), "https://x.test/a");
        assert_eq!(request.headers().len(), 2);
        assert_eq!(request.body, b"{\"a\":1}");

        let response = Response {
            status: 429,
            headers: vec![("retry-after".into(), "3".into())],
            body: b"{\"error\":{\"message\":\"slow down\"}}".to_vec(),
        };
        assert!(!response.is_success());
        assert_eq!(response.header("Retry-After"), Some("3"));
        let body: serde_json::Value = response.json().unwrap();
        assert_eq!(body["error"]["message"], "slow down");
        assert!(response.text().contains("slow down"));
    }
}
