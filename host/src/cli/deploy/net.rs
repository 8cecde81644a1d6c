//! `agenthost deploy`'s HTTP calls under one deadline: each attempt is
//! bounded by the time left, transient failures (no connection, 5xx, 429)
//! are retried with backoff (honouring Retry-After), and what stops the
//! deploy is classified for its exit status.

use std::time::{Duration, Instant};

use reqwest::{RequestBuilder, StatusCode};

use super::{DeployError, Failure};
use crate::api::views::ErrorBody;

/// The first pause between attempts; it doubles up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(4);

/// One answer: its status and body.
pub(super) struct Answer {
    pub status: StatusCode,
    pub body: Vec<u8>,
}

/// What may be retried: a GET anything transient; the upload (not
/// idempotent) only what the server did not act on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Retry {
    /// No connection was made; 429; any 5xx.
    Idempotent,
    /// No connection was made; 429; 503 (nothing was committed).
    NotActedOn,
    /// As `Idempotent`, except that no connection at all on the first
    /// attempt is final: nothing listens at the URL (a typo, a server not
    /// started), which retrying for the whole timeout would hide.
    IdempotentOnceReached,
}

/// Sends `request()` until it gets an answer that is not transient, or the
/// deadline passes; a 4xx is a refusal. `what` names the call in messages.
pub(super) async fn call(
    what: &str,
    deadline: Instant,
    retry: Retry,
    request: impl Fn() -> RequestBuilder,
) -> Result<Answer, DeployError> {
    let answer = send(what, deadline, retry, request).await?;
    if answer.status.is_client_error() {
        return Err(refused(what, &answer));
    }
    Ok(answer)
}

/// Checks the key before anything large is sent: a server refuses a bad
/// key before it reads an upload's body and closes the connection, which
/// the client may see as a failed send rather than the 401 it was. `GET
/// /apps/{slug}` needs the platform key a deploy needs; 404 (a new app)
/// means the key passed.
pub(super) async fn check_key(
    client: &reqwest::Client,
    base: &str,
    api_key: &str,
    slug: &str,
    deadline: Instant,
    retry: Retry,
) -> Result<(), DeployError> {
    let what = "checking the key";
    let request = || {
        client
            .get(format!("{base}/apps/{slug}"))
            .bearer_auth(api_key)
    };
    let answer = send(what, deadline, retry, request).await?;
    match answer.status {
        StatusCode::NOT_FOUND => Ok(()),
        status if status.is_client_error() => Err(refused(what, &answer)),
        _ => Ok(()),
    }
}

/// `call` without judging a 4xx: it is returned as an answer.
async fn send(
    what: &str,
    deadline: Instant,
    retry: Retry,
    request: impl Fn() -> RequestBuilder,
) -> Result<Answer, DeployError> {
    let mut backoff = FIRST_BACKOFF;
    let mut first = true;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = async {
            let response = request().send().await?;
            let status = response.status();
            let retry_after = (response.headers().get(reqwest::header::RETRY_AFTER))
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let body = response.bytes().await?.to_vec();
            Ok::<_, reqwest::Error>((Answer { status, body }, retry_after))
        };
        let (pause, failure) = match tokio::time::timeout(left, attempt).await {
            Err(_) => {
                return Err(DeployError::new(
                    Failure::TimedOut,
                    anyhow::anyhow!("{what}: no answer before the deadline (--timeout-secs)"),
                ));
            }
            Ok(Err(err)) if err.is_connect() && first && retry == Retry::IdempotentOnceReached => {
                return Err(DeployError::new(
                    Failure::Unreachable,
                    anyhow::anyhow!(
                        "{what}: nothing listens at the server's URL ({err}): check --url \
                         (or AGENTHOST_URL), or pass --wait-for-server to retry until \
                         --timeout-secs"
                    ),
                ));
            }
            Ok(Err(err)) if err.is_connect() => (
                backoff,
                DeployError::new(
                    Failure::Unreachable,
                    anyhow::anyhow!("{what}: cannot reach the server: {err}"),
                ),
            ),
            Ok(Err(err)) if retry != Retry::NotActedOn => (
                backoff,
                DeployError::new(Failure::Unreachable, anyhow::anyhow!("{what}: {err}")),
            ),
            Ok(Err(err)) => {
                // The upload may have arrived: sending it again could deploy twice.
                return Err(DeployError::new(
                    Failure::Unreachable,
                    anyhow::anyhow!("{what}: the connection failed: {err}"),
                ));
            }
            Ok(Ok((answer, retry_after))) => {
                let status = answer.status;
                let transient = status == StatusCode::TOO_MANY_REQUESTS
                    || status == StatusCode::SERVICE_UNAVAILABLE
                    || (status.is_server_error() && retry != Retry::NotActedOn);
                if !transient {
                    if status.is_server_error() {
                        return Err(server_failed(what, &answer));
                    }
                    return Ok(answer);
                }
                (
                    retry_after.map_or(backoff, |wait| wait.max(FIRST_BACKOFF)),
                    server_failed(what, &answer),
                )
            }
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if pause >= left {
            return Err(failure);
        }
        eprintln!("\n{failure}; retrying in {} ms", pause.as_millis());
        tokio::time::sleep(pause).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
        first = false;
    }
}

/// A 4xx: "refused (401): <the server's message>".
pub(super) fn refused(what: &str, answer: &Answer) -> DeployError {
    DeployError::new(
        Failure::Refused,
        anyhow::anyhow!(
            "{what}: refused ({}): {}",
            answer.status.as_u16(),
            error_message(&answer.body)
        ),
    )
}

fn server_failed(what: &str, answer: &Answer) -> DeployError {
    let failure = match answer.status {
        StatusCode::TOO_MANY_REQUESTS => Failure::Refused,
        _ => Failure::Unreachable,
    };
    DeployError::new(
        failure,
        anyhow::anyhow!(
            "{what}: the server answered {}: {}",
            answer.status,
            error_message(&answer.body)
        ),
    )
}

/// The message of an error body, or the body as it came.
pub(super) fn error_message(body: &[u8]) -> String {
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(error) => error.error.message,
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    }
}
