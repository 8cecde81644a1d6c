//! Outbound HTTP for guests (`wasi:http/outgoing-handler`): the allowlist,
//! the address check, and the record of every request in the journal.
//!
//! A guest reaches only the origins in its deployment's effective allowlist
//! (the manifest's `[outbound] allow` intersected with the operator's
//! `--outbound-allow` ceiling). After DNS resolution, non-public addresses
//! (loopback, private, link-local such as cloud metadata) are refused unless
//! the operator passed `--outbound-allow-private`; the connection goes to the
//! very address that was checked, so a DNS answer cannot change in between.
//! A refused request fails inside the guest with `HttpRequestDenied` or
//! `DestinationIpProhibited` and never leaves the machine.
//!
//! Journal: `HTTP_REQUEST_DENIED` for a refused request; `HTTP_REQUEST`
//! committed *before* the request leaves (so crash recovery never re-runs a
//! turn that may have had an outside effect, see store::recovery); and
//! `HTTP_RESPONSE` (status or error, duration, body bytes) once the response
//! ends. Never headers, query strings or bodies. Every record goes into the
//! turn's outbox as it happens, so it keeps its place among the turn's
//! events (only when the writer's queue is full does it wait in
//! [`Outbound::take_finished`] for the turn's next write); at the turn's end
//! [`Outbound::close`] also writes one for every request still in flight, so
//! each committed `HTTP_REQUEST` has its `HTTP_RESPONSE`.
//!
//! `wasi:sockets` stays unavailable: this is the guest's only way out.
//! Documented in docs/outbound.md.

pub(crate) mod origin;
mod send;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use wasmtime_wasi_http::{RequestOptions, WasiBody, WasiHttpHooks};

use crate::journal::{NewEvent, payloads};
use crate::store::{Outbox, WriterHandle};
pub(crate) use origin::OriginPattern;

use super::gate::{Failure, Gate};
use crate::journal::TurnErrorKind;
use crate::redact::Redactor;
use crate::runtime::limits::output_exceeded;

/// The operator's outbound settings (`serve` flags).
#[derive(Debug, Clone)]
pub struct OutboundPolicy {
    /// The most any deployment may reach; a declaration is intersected with it.
    pub ceiling: Vec<OriginPattern>,
    /// Let guests reach loopback, private and link-local addresses.
    pub allow_private: bool,
}

impl Default for OutboundPolicy {
    fn default() -> Self {
        OutboundPolicy {
            ceiling: origin::unrestricted(),
            allow_private: false,
        }
    }
}

impl OutboundPolicy {
    /// The effective allowlist of a deployment that declares `declared`.
    pub fn effective(&self, declared: &[String]) -> Vec<OriginPattern> {
        // Stored declarations were checked at deploy time; one that no longer
        // parses allows nothing.
        let declared: Vec<OriginPattern> = declared
            .iter()
            .filter_map(|d| OriginPattern::parse(d).ok())
            .collect();
        origin::effective(&declared, &self.ceiling)
    }
}

/// Timeouts and bounds of one outbound request (the turn's deadline applies too).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
pub(crate) const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(120);
pub(crate) const BETWEEN_BYTES_TIMEOUT: Duration = Duration::from_secs(60);
pub(crate) const MAX_RESPONSE_BYTES: u64 = 32 << 20;
/// Requests one turn may have in flight at once (from its check until its
/// response body is read or dropped); one more is refused (docs/limits.md).
pub(crate) const MAX_IN_FLIGHT_PER_TURN: usize = 16;
/// DNS lookups the whole server runs at once (they run on tokio's blocking
/// pool, which the store's reads share); a lookup waits for its turn within
/// the request's connect timeout.
pub(crate) const MAX_CONCURRENT_LOOKUPS: usize = 32;

/// One turn's outbound access: owned by the turn's context (`OutboundHooks`),
/// shared with its request futures.
pub(super) struct Outbound {
    allow: Arc<[OriginPattern]>,
    allow_private: bool,
    writer: WriterHandle,
    /// The turn's outbox: markers and records keep their order with its other events.
    outbox: Arc<Outbox>,
    redactor: Redactor,
    next_id: AtomicU32,
    records: Mutex<Records>,
    /// The turn's gate: once it is closed (suspended, failed, ended,
    /// cancelled) no request may leave.
    gate: Arc<Gate>,
    /// The turn's `limits.max_output_mb` in bytes: once the turn's outbox
    /// has carried that much, no request leaves and none is recorded.
    max_output: u64,
    /// One permit per request in flight (`MAX_IN_FLIGHT_PER_TURN`).
    in_flight: Arc<tokio::sync::Semaphore>,
}

#[derive(Default)]
struct Records {
    /// Records of requests that ended (or were refused), not yet journaled.
    finished: Vec<NewEvent>,
    /// Requests whose HTTP_REQUEST is committed and whose end is not recorded: id → start.
    in_flight: BTreeMap<String, Instant>,
    /// The turn ended: later records have nowhere to go.
    closed: bool,
}

/// How an outbound request that left ended, for its `HTTP_RESPONSE`.
pub(super) struct Ended {
    pub status: Option<u16>,
    pub bytes: u64,
    pub error: Option<String>,
}

impl Outbound {
    /// Whether the turn's gate refuses requests.
    fn is_stopped(&self) -> bool {
        !self.gate.is_open()
    }

    fn records(&self) -> MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that could not go to the writer when they happened (its queue
    /// was full), in order; the turn's next write takes them first.
    fn take_finished(&self) -> Vec<NewEvent> {
        std::mem::take(&mut self.records().finished)
    }

    /// The turn's last records: those not yet taken, then an `HTTP_RESPONSE`
    /// for each request still in flight. Later ends are not recorded.
    fn close(&self) -> Vec<NewEvent> {
        let mut records = self.records();
        records.closed = true;
        let mut out = std::mem::take(&mut records.finished);
        for (id, started) in std::mem::take(&mut records.in_flight) {
            out.push(response_event(
                &id,
                started,
                &Ended {
                    status: None,
                    bytes: 0,
                    error: Some("the turn ended before the request did".into()),
                },
            ));
        }
        out
    }

    /// Whether the turn has written all the output its limit allows.
    fn output_spent(&self) -> bool {
        self.outbox.bytes() >= self.max_output
    }

    /// Fails the turn for its output: it wanted to record a request past its limit.
    fn fail_output(&self) {
        self.gate.fail(Failure {
            kind: TurnErrorKind::OutputLimit,
            message: output_exceeded(self.max_output),
        });
    }

    fn push_finished(&self, event: NewEvent) {
        let mut records = self.records();
        if !records.closed {
            self.record(&mut records, event);
        }
    }

    /// Journals a record now, through the turn's outbox; it waits for the
    /// turn's next write only when the writer's queue is full, or when an
    /// older record is already waiting (order is kept).
    fn record(&self, records: &mut Records, event: NewEvent) {
        if !records.finished.is_empty() {
            records.finished.push(event);
        } else if let Err(back) = self.writer.try_append(&self.outbox, vec![event]) {
            records.finished.extend(back);
        }
    }

    /// Marks a request as in flight (its HTTP_REQUEST is queued; it leaves once committed).
    pub(super) fn started(&self, id: &str) -> Instant {
        let now = Instant::now();
        self.records().in_flight.insert(id.to_string(), now);
        now
    }

    /// Forgets a request whose marker was never committed: it gets no record.
    pub(super) fn forget(&self, id: &str) {
        self.records().in_flight.remove(id);
    }

    /// Records how a request that left ended; only its first end counts.
    pub(super) fn ended(&self, id: &str, ended: Ended) {
        let mut records = self.records();
        if records.closed {
            return;
        }
        if let Some(started) = records.in_flight.remove(id) {
            self.record(&mut records, response_event(id, started, &ended));
        }
    }

    fn next_request_id(&self) -> String {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        format!("http_{}_{n}", self.outbox.turn())
    }
}

fn response_event(id: &str, started: Instant, ended: &Ended) -> NewEvent {
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    NewEvent::of(&payloads::HttpResponse {
        request_id: id.to_string(),
        status: ended.status,
        error: ended.error.clone(),
        duration_ms: (millis * 10.0).round() / 10.0,
        bytes: ended.bytes,
    })
}

/// A turn's outbound HTTP, the `wasi:http` hooks of its instance: the one
/// owner of the turn's `Outbound` (its request futures share it).
pub(super) struct OutboundHooks(Arc<Outbound>);

/// A deployment's outbound access, made once when it is loaded: its
/// effective allowlist (the manifest's within the operator's ceiling) and
/// the operator's `--outbound-allow-private`. Each turn makes its own
/// `OutboundHooks` from it (`prepare`).
#[derive(Clone)]
pub(super) struct Access {
    /// The deployment's effective allowlist.
    pub allow: Arc<[OriginPattern]>,
    /// The operator's `--outbound-allow-private`.
    pub allow_private: bool,
}

impl Access {
    /// The access of a deployment that declares `declared`, under `policy`.
    pub(super) fn configure(policy: &OutboundPolicy, declared: &[String]) -> Access {
        Access {
            allow: policy.effective(declared).into(),
            allow_private: policy.allow_private,
        }
    }

    /// No outbound access at all (a turn whose deployment could not be loaded).
    pub(super) fn none() -> Access {
        Access {
            allow: Arc::new([]),
            allow_private: false,
        }
    }

    /// The outbound access of the turn whose events go to `outbox`, whose
    /// effects `gate` allows and whose output is at most `max_output` bytes.
    pub(super) fn prepare(
        self,
        writer: WriterHandle,
        outbox: Arc<Outbox>,
        redactor: Redactor,
        gate: Arc<Gate>,
        max_output: u64,
    ) -> OutboundHooks {
        OutboundHooks(Arc::new(Outbound {
            allow: self.allow,
            allow_private: self.allow_private,
            writer,
            outbox,
            redactor,
            next_id: AtomicU32::new(1),
            records: Mutex::new(Records::default()),
            gate,
            max_output,
            in_flight: Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT_PER_TURN)),
        }))
    }
}

impl OutboundHooks {
    /// Records that could not go to the writer when they happened, in
    /// order; the turn's next write takes them first.
    pub(super) fn take_finished(&self) -> Vec<NewEvent> {
        self.0.take_finished()
    }

    /// The turn's last records: those not yet taken, then an `HTTP_RESPONSE`
    /// for each request still in flight. Later ends are not recorded.
    pub(super) fn close(&self) -> Vec<NewEvent> {
        self.0.close()
    }
}

/// The turn's outbound access for requests the host makes on the agent's
/// behalf (MCP calls, `runtime::mcp`): the same allowlist, address check,
/// bounds, gate and records as the guest's own requests.
pub(crate) struct HostRequests(Arc<Outbound>);

impl HostRequests {
    /// Checks, journals and sends `request` as `send` does a guest's.
    pub(crate) async fn send(
        &self,
        request: http::Request<WasiBody>,
        options: RequestOptions,
    ) -> Result<http::Response<WasiBody>, wasmtime_wasi_http::Error> {
        self.0.send(request, Some(options)).await
    }
}

impl OutboundHooks {
    /// The same access, for requests the host makes itself.
    pub(super) fn host_requests(&self) -> HostRequests {
        HostRequests(self.0.clone())
    }
}

type Sent = Result<
    (
        http::Response<WasiBody>,
        Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ),
    wasmtime_wasi_http::Error,
>;

impl WasiHttpHooks for OutboundHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), wasmtime_wasi_http::Error>> + Send>,
    ) -> Box<dyn Future<Output = Sent> + Send> {
        let outbound = self.0.clone();
        Box::new(async move {
            let response = outbound.send(request, options).await?;
            // The connection is driven by a task the response body owns.
            Ok((
                response,
                Box::new(async { Ok(()) }) as Box<dyn Future<Output = _> + Send>,
            ))
        })
    }
}
