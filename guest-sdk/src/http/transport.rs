//! The wasi:http side of `send` and `send_events`: one `wstd` event loop per
//! request (`block_on`), and the mapping of wasi-http error codes to `HttpError`.

use std::fmt;

use futures_util::{StreamExt, TryStreamExt};
use wstd::http::{Body, BodyExt, Client, ErrorCode};

use super::sse::{self, SseEvent};
use super::{HttpError, Request, Response, origin};
use crate::error::Error;

pub(super) fn send(request: Request) -> Result<Response, Error> {
    let origin = origin(&request.url)?;
    wstd::runtime::block_on(async {
        let (mut response, body) = exchange(request, &origin).await?;
        response.body = read_all(body, &origin).await?;
        Ok(response)
    })
}

pub(super) fn send_events<F>(request: Request, mut on_event: F) -> Result<Response, Error>
where
    F: FnMut(SseEvent) -> Result<(), Error>,
{
    let origin = origin(&request.url)?;
    wstd::runtime::block_on(async {
        let (mut response, body) = exchange(request, &origin).await?;
        if !response.is_success() {
            response.body = read_all(body, &origin).await?;
            return Ok(response);
        }
        let chunks = body
            .into_boxed_body()
            .into_data_stream()
            .map_err(|e| BodyError(format!("{e:#}")));
        let mut events = sse::decode(chunks);
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| match e {
                sse_stream::Error::Body(e) => failed(&origin, e.to_string()),
                other => failed(&origin, format!("the event stream is malformed: {other}")),
            })?;
            on_event(event)?;
        }
        Ok(response)
    })
}

/// Sends the request and waits for the response's head.
async fn exchange(request: Request, origin: &str) -> Result<(Response, Body), Error> {
    let mut builder = wstd::http::Request::builder()
        .method(request.method.as_str())
        .uri(request.url.as_str());
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let wasi_request = builder
        .body(Body::from(request.body))
        .map_err(|e| HttpError::InvalidRequest(e.to_string()))?;
    let response = Client::new()
        .send(wasi_request)
        .await
        .map_err(|e| refused(origin, &e))?;
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_owned(), value)
        })
        .collect();
    let status = response.status().as_u16();
    let body = response.into_body();
    Ok((
        Response {
            status,
            headers,
            body: Vec::new(),
        },
        body,
    ))
}

async fn read_all(mut body: Body, origin: &str) -> Result<Vec<u8>, Error> {
    match body.contents().await {
        Ok(bytes) => Ok(bytes.to_vec()),
        Err(e) => Err(refused(origin, &e).into()),
    }
}

/// Maps a failed exchange to an `HttpError`, naming the host's refusals.
fn refused(origin: &str, error: &wstd::http::Error) -> HttpError {
    match error.downcast_ref::<ErrorCode>() {
        Some(ErrorCode::HttpRequestDenied) => HttpError::Denied {
            origin: origin.to_owned(),
        },
        Some(ErrorCode::DestinationIpProhibited) => HttpError::AddressProhibited {
            origin: origin.to_owned(),
        },
        Some(code) => failed(origin, describe(code)),
        None => failed(origin, format!("{error:#}")),
    }
}

fn failed(origin: &str, message: String) -> HttpError {
    HttpError::Failed {
        origin: origin.to_owned(),
        message,
    }
}

/// Words for the wasi-http error codes an agent is likely to meet.
fn describe(code: &ErrorCode) -> String {
    match code {
        ErrorCode::DnsTimeout => "the DNS lookup timed out".into(),
        ErrorCode::DnsError(e) => format!(
            "the DNS lookup failed ({})",
            e.rcode.as_deref().unwrap_or("no such host")
        ),
        ErrorCode::DestinationNotFound => "no such host".into(),
        ErrorCode::DestinationUnavailable => "the server is unavailable".into(),
        ErrorCode::ConnectionRefused => "the connection was refused".into(),
        ErrorCode::ConnectionTerminated => "the connection was closed".into(),
        ErrorCode::ConnectionTimeout => "the connection timed out".into(),
        ErrorCode::ConnectionReadTimeout | ErrorCode::HttpResponseTimeout => {
            "the server took too long to answer".into()
        }
        ErrorCode::TlsProtocolError | ErrorCode::TlsCertificateError => {
            "the TLS handshake failed".into()
        }
        ErrorCode::HttpResponseIncomplete => "the response was cut off".into(),
        ErrorCode::InternalError(Some(m)) => m.clone(),
        other => format!("{other:?}"),
    }
}

/// A body read error, as the SSE decoder wants it (a `std::error::Error`).
#[derive(Debug)]
struct BodyError(String);

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BodyError {}
