//! The journal's data model: event types, their payloads, envelopes and
//! their stored encoding.
//!
//! A session is an append-only log of events. This module owns what an event
//! *is*; `store` owns where events live and `api::events` how they are streamed.
//! The encoding written here is a compatibility contract: stored records are
//! never rewritten, so every change must stay readable by later versions.

mod event;
pub mod payloads;

pub use event::{EventType, NewEvent, StoredEvent, decode_record, encode_record};
#[cfg(test)]
pub(crate) use payloads::Payload;
pub use payloads::TurnErrorKind;
