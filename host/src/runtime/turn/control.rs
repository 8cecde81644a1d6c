//! The turns this host runs, and how one is stopped from outside: a cancel
//! (`POST /sessions/{id}/cancel`, the end of a session, or another host's
//! request heard by the PostgreSQL listener) closes the turn's gate
//! (`gate.rs`), which refuses every later effect, and the turn's runner
//! drops the guest's call at once — whatever the guest is doing, waiting on
//! outbound HTTP included — and ends the turn with TURN_ERROR `cancelled`.
//! The runner's final commit stays the only ending.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use uuid::Uuid;

use super::gate::Gate;

/// The turns registered on this host, by session (a session runs one turn
/// at a time): each one's gate.
#[derive(Default)]
pub(super) struct Controls(Mutex<HashMap<Uuid, Arc<Gate>>>);

/// A turn's place in the registry, given up when its task ends or unwinds.
pub(super) struct Registered {
    controls: Arc<Controls>,
    session: Uuid,
    pub(super) gate: Arc<Gate>,
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
            .is_some_and(|g| Arc::ptr_eq(g, &self.gate))
        {
            map.remove(&self.session);
        }
    }
}

impl Controls {
    /// Registers `turn` of `session` as run by this host, with its new gate.
    pub(super) fn register(self: &Arc<Self>, session: Uuid, turn: u32) -> Registered {
        let gate = Arc::new(Gate::new(turn));
        (self.0.lock().unwrap_or_else(PoisonError::into_inner)).insert(session, gate.clone());
        Registered {
            controls: self.clone(),
            session,
            gate,
        }
    }

    /// Cancels `turn` of `session` if this host runs it; `false` otherwise.
    /// The first cancel names the turn's canceller; later ones change nothing.
    pub(super) fn cancel(&self, session: Uuid, turn: u32, by: &str) -> bool {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(gate) = map.get(&session).filter(|g| g.turn() == turn) else {
            return false;
        };
        gate.cancel(by);
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
