//! Guest stdout/stderr: captured in memory up to a cap, the rest counted and dropped.
//!
//! Unlike wasmtime-wasi's `MemoryOutputPipe`, writing past the cap never fails,
//! so a chatty guest is not killed by its own logging.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};

#[derive(Clone)]
pub(crate) struct CappedOutput {
    inner: Arc<Mutex<Captured>>,
}

#[derive(Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped: u64,
    cap: usize,
}

impl CappedOutput {
    pub(super) fn new(cap: usize) -> Self {
        CappedOutput {
            inner: Arc::new(Mutex::new(Captured {
                cap,
                ..Captured::default()
            })),
        }
    }

    /// What was captured (lossy UTF-8) and how many bytes were dropped.
    pub(crate) fn contents(&self) -> (String, u64) {
        let captured = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (
            String::from_utf8_lossy(&captured.bytes).into_owned(),
            captured.dropped,
        )
    }
}

impl IsTerminal for CappedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedOutput {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl AsyncWrite for CappedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut captured = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let room = captured.cap.saturating_sub(captured.bytes.len());
        let kept = buf.len().min(room);
        captured.bytes.extend_from_slice(&buf[..kept]);
        captured.dropped += (buf.len() - kept) as u64;
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
