//! Sending one checked request: allowlist, DNS and address check, the
//! journal marker, connect (TCP, TLS) to the checked address, and a response
//! body that counts its bytes, bounds its size and records how it ended.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::net::TcpStream;
use wasmtime_wasi::runtime::{AbortOnDropJoinHandle, spawn};
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

use super::origin::{Origin, Scheme};
use super::{
    BETWEEN_BYTES_TIMEOUT, CONNECT_TIMEOUT, Ended, FIRST_BYTE_TIMEOUT, MAX_CONCURRENT_LOOKUPS,
    MAX_IN_FLIGHT_PER_TURN, MAX_RESPONSE_BYTES, Outbound,
};
use crate::journal::{NewEvent, payloads};
use crate::net::non_public_address;
use crate::runtime::limits::OUTBOX_BYTES;

/// The server's DNS lookups in progress, at most `MAX_CONCURRENT_LOOKUPS`.
static LOOKUPS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_CONCURRENT_LOOKUPS);

/// Resolves `host` once one of the server's lookup permits is free; the
/// wait counts against `timeout` (`Err(Elapsed)`).
async fn lookup(
    host: &str,
    port: u16,
    timeout: Duration,
) -> Result<std::io::Result<Vec<SocketAddr>>, tokio::time::error::Elapsed> {
    tokio::time::timeout(timeout, async {
        let _turn = LOOKUPS.acquire().await;
        Ok(tokio::net::lookup_host((host, port)).await?.collect())
    })
    .await
}

/// What the journal says about a request before it leaves.
struct Described {
    id: String,
    /// The method, redacted (a guest may choose any token).
    method: String,
    origin: Origin,
    /// The origin as journaled and logged: redacted (a secret may be part
    /// of a host name).
    shown_origin: String,
    path: String,
}

impl Outbound {
    /// Checks, journals and sends `request`; a refusal or failure is recorded
    /// and returned to the guest as its `wasi:http` error code.
    pub(super) async fn send(
        self: &Arc<Self>,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<http::Response<WasiBody>, Error> {
        let (head, body) = request.into_parts();
        let mut body = Some(body);
        let sent = self.send_checked(head, &mut body, options).await;
        if let Some(body) = body.take() {
            // Refused before it left: the guest may still be writing the body,
            // and a dropped body would fail its write with a "reset" that
            // races (and hides) the refusal's own error code.
            discard(body);
        }
        sent
    }

    async fn send_checked(
        self: &Arc<Self>,
        head: http::request::Parts,
        body: &mut Option<WasiBody>,
        options: Option<RequestOptions>,
    ) -> Result<http::Response<WasiBody>, Error> {
        // Every request is recorded: past the turn's output limit none may
        // be, so none leaves; below it, the records wait for the commit of
        // what the turn queued before, as its other writes do.
        if self.output_spent() {
            self.fail_output();
            return Err(Error::HttpRequestDenied);
        }
        if self.outbox.throttle(OUTBOX_BYTES).await.is_err() {
            return Err(Error::InternalError(Some(
                "the host could not record the request; it was not sent".into(),
            )));
        }
        let mut request = http::Request::from_parts(head, ());
        let origin = Origin::of(request.uri()).ok_or(Error::HttpRequestUriInvalid)?;
        let described = Described {
            id: self.next_request_id(),
            method: self.redactor.redact(request.method().as_str()).into_owned(),
            // The path only: a query string may carry credentials.
            path: self.redactor.redact_path(request.uri().path()).into_owned(),
            shown_origin: self.redactor.redact(&origin.to_string()).into_owned(),
            origin,
        };
        if self.is_stopped() {
            self.denied(
                &described,
                "the turn is suspended, failed or ended: it may have no more effects",
            );
            return Err(Error::HttpRequestDenied);
        }
        if !self.allow.iter().any(|p| p.matches(&described.origin)) {
            self.denied(
                &described,
                "the origin is not on this deployment's outbound allowlist",
            );
            return Err(Error::HttpRequestDenied);
        }
        // Held until the response body is read or dropped.
        let Ok(slot) = self.in_flight.clone().try_acquire_owned() else {
            self.denied(
                &described,
                &format!(
                    "the turn already has {MAX_IN_FLIGHT_PER_TURN} requests in flight: read or drop a response first"
                ),
            );
            return Err(Error::HttpRequestDenied);
        };
        let options = options.unwrap_or_default();
        let connect_timeout = bounded(options.connect_timeout, CONNECT_TIMEOUT);
        let addrs = match self.resolve(&described, connect_timeout).await {
            Ok(addrs) => addrs,
            Err(err) => return Err(err),
        };
        // The marker: committed before anything leaves the machine.
        let marker = NewEvent::of(&payloads::HttpRequest {
            request_id: described.id.clone(),
            method: described.method.clone(),
            origin: described.shown_origin.clone(),
            path: described.path.clone(),
        });
        let queued = self.writer.append(&self.outbox, vec![marker]).await;
        // In flight from the moment its marker is queued, so that a turn
        // stopped while the commit is awaited (a cancel, the deadline) still
        // ends the committed marker with its HTTP_RESPONSE.
        self.started(&described.id);
        // Ends the record however this future ends, cancellation included.
        let mut record = Record {
            outbound: self.clone(),
            id: described.id,
            status: None,
            _slot: slot,
        };
        let committed = match queued {
            Ok(ack) => matches!(ack.await, Ok(Ok(()))),
            Err(_) => false,
        };
        if !committed {
            // Nothing of it is on record, so no response either.
            self.forget(&record.id);
            return Err(Error::InternalError(Some(
                "the host could not record the request; it was not sent".into(),
            )));
        }
        // Checked again: the turn may have stopped while the marker waited.
        if self.is_stopped() {
            let why = "not sent: the turn was suspended, failed or ended meanwhile";
            record.end(0, Some(why.into()));
            return Err(Error::HttpRequestDenied);
        }
        // The request line carries only the path: the origin is the connection.
        let path = request
            .uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
            .parse()
            .map_err(|_| Error::HttpRequestUriInvalid)?;
        *request.uri_mut() = path;
        let first_byte = bounded(options.first_byte_timeout, FIRST_BYTE_TIMEOUT);
        let between = bounded(options.between_bytes_timeout, BETWEEN_BYTES_TIMEOUT);
        let sent = async {
            let (mut sender, conn) = connect(&described.origin, &addrs, connect_timeout).await?;
            let conn = spawn(async move {
                if let Err(err) = conn.await {
                    tracing::debug!(error = %err, "outbound connection ended");
                }
            });
            let body = body.take().ok_or(Error::InternalError(None))?;
            let request = request.map(|()| body);
            let response = tokio::time::timeout(first_byte, sender.send_request(request))
                .await
                .map_err(|_| Error::ConnectionReadTimeout)?
                .map_err(Error::from)?;
            Ok::<_, Error>((response, conn))
        }
        .await;
        match sent {
            Ok((response, conn)) => {
                record.status = Some(response.status().as_u16());
                Ok(response.map(|incoming| {
                    CountedBody {
                        incoming,
                        bytes: 0,
                        between,
                        idle: Box::pin(tokio::time::sleep(between)),
                        record,
                        _conn: conn,
                    }
                    .boxed_unsync()
                }))
            }
            Err(err) => {
                record.end(0, Some(err.to_string()));
                Err(err)
            }
        }
    }

    /// The request's addresses, each one checked.
    async fn resolve(
        &self,
        described: &Described,
        timeout: Duration,
    ) -> Result<Vec<SocketAddr>, Error> {
        let origin = &described.origin;
        let addrs: Vec<SocketAddr> = match origin.host.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, origin.port)],
            Err(_) => match lookup(&origin.host, origin.port, timeout).await {
                Err(_) => {
                    self.denied(described, "DNS resolution timed out");
                    return Err(Error::DnsTimeout);
                }
                Ok(Err(err)) => {
                    self.denied(described, &format!("DNS resolution failed: {err}"));
                    return Err(Error::DnsError {
                        rcode: Some(err.to_string()),
                        info_code: None,
                    });
                }
                Ok(Ok(addrs)) => addrs,
            },
        };
        if addrs.is_empty() {
            self.denied(
                described,
                &format!("{} resolves to no address", origin.host),
            );
            return Err(Error::DestinationNotFound);
        }
        if self.allow_private {
            return Ok(addrs);
        }
        let (public, refused): (Vec<SocketAddr>, Vec<SocketAddr>) = addrs
            .into_iter()
            .partition(|a| non_public_address(a.ip()).is_none());
        if public.is_empty() {
            let why = match refused.first() {
                Some(addr) => format!(
                    "{} resolves to {} address {}; private addresses need the operator's --outbound-allow-private",
                    origin.host,
                    non_public_address(addr.ip()).unwrap_or("a non-public"),
                    addr.ip()
                ),
                None => format!("{} resolves to no address", origin.host),
            };
            self.denied(described, &why);
            return Err(Error::DestinationIpProhibited);
        }
        Ok(public)
    }

    fn denied(&self, described: &Described, reason: &str) {
        if self.output_spent() {
            // A guest looping on refused requests writes no more than its limit.
            self.fail_output();
            return;
        }
        // The reason may name the host, which may hold a secret.
        let reason = self.redactor.redact(reason);
        tracing::info!(session = %self.outbox.session(), turn = self.outbox.turn(), origin = %described.shown_origin, reason = %reason, "outbound request refused");
        self.push_finished(NewEvent::of(&payloads::HttpRequestDenied {
            request_id: described.id.clone(),
            method: described.method.clone(),
            origin: described.shown_origin.clone(),
            path: described.path.clone(),
            reason: reason.into_owned(),
        }));
    }
}

/// A guest may shorten a timeout, not lengthen it.
fn bounded(asked: Option<Duration>, max: Duration) -> Duration {
    asked.map_or(max, |d| d.clamp(Duration::from_millis(1), max))
}

type Connection = hyper::client::conn::http1::Connection<TokioIo<Box<dyn Stream>>, WasiBody>;

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Connects to the first checked address that answers, with TLS for https.
async fn connect(
    origin: &Origin,
    addrs: &[SocketAddr],
    timeout: Duration,
) -> Result<
    (
        hyper::client::conn::http1::SendRequest<WasiBody>,
        Connection,
    ),
    Error,
> {
    let mut last = Error::DestinationUnavailable;
    let mut tcp = None;
    for addr in addrs {
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                tcp = Some(stream);
                break;
            }
            Ok(Err(err)) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
                last = Error::ConnectionRefused
            }
            Ok(Err(err)) => last = Error::Connect(err),
            Err(_) => last = Error::ConnectionTimeout,
        }
    }
    let tcp = tcp.ok_or(last)?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Stream> = match origin.scheme {
        Scheme::Http => Box::new(tcp),
        Scheme::Https => {
            let name = match origin.host.parse::<IpAddr>() {
                Ok(ip) => rustls::pki_types::ServerName::from(ip),
                Err(_) => rustls::pki_types::ServerName::try_from(origin.host.clone())
                    .map_err(|_| Error::HttpRequestUriInvalid)?,
            };
            let tls = tokio::time::timeout(timeout, tls_connector()?.connect(name, tcp))
                .await
                .map_err(|_| Error::ConnectionTimeout)?
                .map_err(Error::Tls)?;
            Box::new(tls)
        }
    };
    tokio::time::timeout(
        timeout,
        hyper::client::conn::http1::handshake(TokioIo::new(stream)),
    )
    .await
    .map_err(|_| Error::ConnectionTimeout)?
    .map_err(Error::from)
}

/// One TLS client configuration for the process: webpki roots, ring.
fn tls_connector() -> Result<tokio_rustls::TlsConnector, Error> {
    static CONFIG: OnceLock<Option<Arc<rustls::ClientConfig>>> = OnceLock::new();
    let config = CONFIG.get_or_init(|| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
            .map_err(|e| tracing::error!(error = %e, "cannot build the TLS client configuration"))
            .ok()
    });
    let config = config.clone().ok_or(Error::ConfigurationError)?;
    Ok(tokio_rustls::TlsConnector::from(config))
}

/// The `HTTP_RESPONSE` of a request that left: its first end counts; a
/// drop before any end (cancelled, or the body left unread) is an end too.
struct Record {
    outbound: Arc<Outbound>,
    id: String,
    status: Option<u16>,
    /// The turn's in-flight slot, freed with the record.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl Record {
    fn end(&self, bytes: u64, error: Option<String>) {
        let status = self.status;
        (self.outbound).ended(
            &self.id,
            Ended {
                status,
                bytes,
                error,
            },
        );
    }
}

impl Drop for Record {
    fn drop(&mut self) {
        let error = match self.status {
            None => "the request was cancelled before its response arrived",
            Some(_) => "the agent did not read the whole response",
        };
        self.end(0, Some(error.into()));
    }
}

/// The response body as the guest reads it: counted, bounded in size and in
/// idle time, recorded when it ends, fails or is dropped unread.
struct CountedBody {
    incoming: Incoming,
    bytes: u64,
    between: Duration,
    idle: Pin<Box<tokio::time::Sleep>>,
    record: Record,
    _conn: AbortOnDropJoinHandle<()>,
}

impl CountedBody {
    fn end(&mut self, error: Option<String>) {
        self.record.end(self.bytes, error);
    }
}

impl Body for CountedBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(None) => {
                this.end(None);
                Poll::Ready(None)
            }
            Poll::Ready(Some(Err(err))) => {
                let err = Error::from(err);
                this.end(Some(err.to_string()));
                Poll::Ready(Some(Err(err)))
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.bytes += data.len() as u64;
                }
                if this.bytes > MAX_RESPONSE_BYTES {
                    this.end(Some(format!(
                        "the response body is larger than {MAX_RESPONSE_BYTES} bytes"
                    )));
                    return Poll::Ready(Some(Err(Error::HttpResponseBodySize(Some(
                        MAX_RESPONSE_BYTES,
                    )))));
                }
                let deadline = tokio::time::Instant::now() + this.between;
                this.idle.as_mut().reset(deadline);
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => {
                ready!(this.idle.as_mut().poll(cx));
                this.end(Some(
                    "no data from the server within the idle timeout".into(),
                ));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

impl Drop for CountedBody {
    fn drop(&mut self) {
        // Before the record's own drop, so the bytes read so far are kept.
        self.end(Some("the agent did not read the whole response".into()));
    }
}

/// Reads a refused request's body to its end and drops it, so that the guest
/// writing it sees the request's error rather than a broken body stream. The
/// guest's own limits bound how much it can write.
fn discard(mut body: WasiBody) {
    tokio::spawn(async move { while let Some(Ok(_)) = body.frame().await {} });
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{LOOKUPS, MAX_CONCURRENT_LOOKUPS, lookup};

    #[tokio::test]
    async fn lookups_wait_for_a_free_permit_within_their_timeout() {
        let all = u32::try_from(MAX_CONCURRENT_LOOKUPS).unwrap();
        let held = LOOKUPS.acquire_many(all).await.unwrap();
        let waited = lookup("localhost", 80, Duration::from_millis(200)).await;
        assert!(waited.is_err(), "no permit free: the lookup times out");
        drop(held);
        let addrs = lookup("localhost", 80, Duration::from_secs(10)).await;
        assert!(!addrs.unwrap().unwrap().is_empty());
    }
}
