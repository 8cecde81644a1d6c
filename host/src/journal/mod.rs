//! The journal's data model: event types, their payloads, envelopes and
//! their stored encoding.
//!
//! A session is an append-only log of events. This module owns what an event
//! *is*; `store` owns where events live and `api::events` how they are streamed.
//! The encoding written here is a compatibility contract: stored records are
//! never rewritten, so every change must stay readable by later versions.

mod event;
mod event_id;
pub(crate) mod payloads;

pub(crate) use event::EventType;
pub(crate) use event::record_id;
pub use event::{NewEvent, StoredEvent, decode_record, encode_record};
pub(crate) use event_id::{event_id, seq_of};
#[cfg(test)]
pub(crate) use payloads::Payload;
pub(crate) use payloads::TurnErrorKind;
