//! Assistant messages: `Message` streams one message (start, deltas, end);
//! `Turn::say` writes a whole one.

use crate::bindings::agenthost::agent::host;
use crate::error::{Error, host};
use crate::turn::Turn;

/// An open assistant message. Each [`Message::write`] is one MESSAGE_DELTA;
/// [`Message::finish`] (or dropping it) sends MESSAGE_END with the full text.
#[derive(Debug)]
pub struct Message {
    id: String,
    open: bool,
}

impl Message {
    /// The message's id, as the host assigned it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Appends `text` to the message (one MESSAGE_DELTA; nothing for empty text).
    pub fn write(&mut self, text: &str) -> Result<(), Error> {
        if text.is_empty() {
            return Ok(());
        }
        host(host::message_delta(&self.id, text))
    }

    /// Closes the message (MESSAGE_END). Dropping it does the same, ignoring errors.
    pub fn finish(mut self) -> Result<(), Error> {
        self.open = false;
        host(host::message_end(&self.id))
    }
}

impl Drop for Message {
    fn drop(&mut self) {
        if self.open {
            // Best effort: an error here means the host has closed the turn anyway.
            let _ = host::message_end(&self.id);
        }
    }
}

impl Turn {
    /// Opens an assistant message (MESSAGE_START) to stream into.
    pub fn message(&self) -> Result<Message, Error> {
        let id = host(host::message_start())?;
        Ok(Message { id, open: true })
    }

    /// Writes `text` as a whole assistant message (start, one delta, end).
    pub fn say(&self, text: &str) -> Result<(), Error> {
        let mut message = self.message()?;
        message.write(text)?;
        message.finish()
    }
}
