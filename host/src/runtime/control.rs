//! The turns this host runs, and how one is stopped from outside: a cancel
//! (`POST /sessions/{id}/cancel`, the end of a session, or another host's
//! request heard by the PostgreSQL listener) reaches the turn's runner,
//! which drops the guest's call at once — whatever the guest is doing,
//! waiting on outbound HTTP included — and ends the turn with TURN_ERROR
//! `cancelled`. The runner's final commit stays the only ending.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tokio::sync::watch;
use uuid::Uuid;

/// The turns registered on this host, by session (a session runs one turn at a time).
#[derive(Default)]
pub(super) struct Controls(Mutex<HashMap<Uuid, Arc<Control>>>);

/// One registered turn.
pub(super) struct Control {
    turn: u32,
    /// Who cancelled the turn, once someone has.
    cancelled_by: watch::Sender<Option<String>>,
}

impl Control {
    /// Resolves once the turn is cancelled, with who cancelled it.
    pub(super) async fn cancelled(&self) -> String {
        let mut rx = self.cancelled_by.subscribe();
        loop {
            let current = rx.borrow_and_update().clone();
            if let Some(by) = current {
                return by;
            }
            if rx.changed().await.is_err() {
                // The sender lives in `self`: unreachable while borrowed.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// A turn's place in the registry, given up when its task ends or unwinds.
pub(super) struct Registered {
    controls: Arc<Controls>,
    session: Uuid,
    pub(super) control: Arc<Control>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut map = self
            .controls
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if map
            .get(&self.session)
            .is_some_and(|c| Arc::ptr_eq(c, &self.control))
        {
            map.remove(&self.session);
        }
    }
}

impl Controls {
    /// Registers `turn` of `session` as run by this host.
    pub(super) fn register(self: &Arc<Self>, session: Uuid, turn: u32) -> Registered {
        let control = Arc::new(Control {
            turn,
            cancelled_by: watch::Sender::new(None),
        });
        (self.0.lock().unwrap_or_else(PoisonError::into_inner)).insert(session, control.clone());
        Registered {
            controls: self.clone(),
            session,
            control,
        }
    }

    /// Cancels `turn` of `session` if this host runs it; `false` otherwise.
    /// The first cancel names the turn's canceller; later ones change nothing.
    pub(super) fn cancel(&self, session: Uuid, turn: u32, by: &str) -> bool {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(control) = map.get(&session).filter(|c| c.turn == turn) else {
            return false;
        };
        control.cancelled_by.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(by.to_string());
            true
        });
        true
    }
}

/// A test-only fault: when the server's environment sets
/// `AGENTHOST_TEST_PANIC_ON` to a marker, host code panics on a message
/// delta that contains it (the supervisor's end-to-end test). Unset in any
/// real deployment; read once.
pub(super) fn injected_panic(text: &str) {
    static MARKER: OnceLock<Option<String>> = OnceLock::new();
    let marker = MARKER.get_or_init(|| {
        std::env::var("AGENTHOST_TEST_PANIC_ON")
            .ok()
            .filter(|m| !m.is_empty())
    });
    if let Some(marker) = marker
        && text.contains(marker.as_str())
    {
        panic!("AGENTHOST_TEST_PANIC_ON: injected panic in host code");
    }
}
