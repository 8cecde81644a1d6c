//! The accept loop: TCP connections served as HTTP/1.1 by hyper, and their graceful end.
//!
//! Ours rather than `axum::serve`, which exposes none of hyper's knobs, for
//! what a server holding thousands of idle event streams needs:
//! - a 30 s limit on reading a request's head, so a client that never
//!   finishes its headers does not hold a connection forever;
//! - a request head of at most 64 KiB (larger gets 431), and hyper's
//!   buffers capped near that (its default is ~400 KiB);
//! - `TCP_NODELAY`: without it, Nagle's algorithm and the client's delayed
//!   ACK hold a stream's first small frames back ~40 ms on a reused
//!   connection;
//! - and less per connection: 10,000 idle streams cost 14.7 KiB each here
//!   against 16.4 KiB under `axum::serve` (BENCHMARKS.md).
//!
//! Shutdown: when `shutdown` resolves the loop stops accepting, every
//! connection finishes the request it is serving and closes (event streams
//! end on their own, `api::events`), and `serve` returns once all are closed.

use std::future::Future;
use std::io;
use std::pin::pin;
use std::time::Duration;

use std::net::SocketAddr;

use axum::Router;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt;

/// The largest request head (request line and headers) accepted.
const MAX_HEAD: usize = 64 * 1024;
/// hyper's read and write buffer cap (hyper applies it loosely).
const MAX_BUF_SIZE: usize = 64 * 1024;
/// How long a client may take to send a request's head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Pause after an accept error that is not the client's (e.g. out of file descriptors).
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` until `shutdown` resolves, then stops
/// accepting and waits for every connection to close.
pub(super) async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_header_size(MAX_HEAD)
        .max_buf_size(MAX_BUF_SIZE);
    // `stopping` flips once; each connection holds a `closed` receiver, so
    // `closed_tx.closed()` resolves when the last connection is gone.
    let (stopping_tx, stopping) = watch::channel(false);
    let (closed_tx, closed) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    accept_error(err).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let connection = connection(&http, tcp, peer, router.clone(), stopping.clone());
        let closed = closed.clone();
        tokio::spawn(async move {
            connection.await;
            drop(closed);
        });
    }
    drop(listener);
    let _ = stopping_tx.send(true);
    drop(closed);
    closed_tx.closed().await;
    Ok(())
}

/// Serves one connection until the client closes it, or until `stopping`:
/// then hyper finishes the request in flight and closes.
fn connection(
    http: &http1::Builder,
    tcp: TcpStream,
    peer: SocketAddr,
    router: Router,
    mut stopping: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    if let Err(err) = tcp.set_nodelay(true) {
        tracing::debug!(error = %err, "cannot set TCP_NODELAY");
    }
    // Every request knows the address it came from (the throttle of failed
    // authentication counts by it).
    let service = router.map_request(move |mut request: Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        request
    });
    let conn = http.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(service));
    async move {
        let mut conn = pin!(conn);
        let result = tokio::select! {
            result = conn.as_mut() => result,
            () = async { drop(stopping.wait_for(|stop| *stop).await) } => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        };
        if let Err(err) = result {
            // Resets, half-sent requests, header timeouts: the client's doing.
            tracing::debug!(error = %err, "connection ended with an error");
        }
    }
}

/// Errors that concern one connection are skipped; others (out of file
/// descriptors, out of memory) get a pause so the loop does not spin.
async fn accept_error(err: io::Error) {
    use io::ErrorKind::*;
    if matches!(
        err.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset | Interrupted
    ) {
        return;
    }
    tracing::warn!(error = %err, "cannot accept a connection; pausing");
    tokio::time::sleep(ACCEPT_BACKOFF).await;
}
