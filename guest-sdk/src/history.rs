//! The session's journal as the agent reads it: `History` pages through
//! `read-history`; `Event` and `ChatMessage` are what it yields.

use std::collections::VecDeque;

use serde_json::Value;

use crate::bindings::agenthost::agent::host;
use crate::error::{Error, host};
use crate::journal;
use crate::turn::Turn;

/// How many events [`History`] asks for per page (the host may cap it lower).
const PAGE_SIZE: u32 = 256;

/// One journal event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its position in the session's journal (increasing).
    pub seq: u64,
    /// `SESSION_CREATED`, `MESSAGE_END`, `TOOL_CALL`, ...
    pub event_type: String,
    /// The payload.
    pub payload: Value,
}

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The person (or client) using the agent: its text inputs.
    User,
    /// The agent.
    Assistant,
    /// A role this SDK does not know.
    Other(String),
}

/// A finished message of the transcript (from a MESSAGE_END event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its full text.
    pub text: String,
}

impl Event {
    /// The finished message this event carries, if it is a MESSAGE_END.
    pub fn chat_message(&self) -> Option<ChatMessage> {
        if self.event_type != journal::MESSAGE_END {
            return None;
        }
        let end: journal::MessageEnd = self.payload_as()?;
        let role = match end.role.as_str() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            _ => Role::Other(end.role),
        };
        Some(ChatMessage {
            role,
            text: end.text,
        })
    }

    /// The payload read as its type in [`crate::journal`] (for example
    /// `event.payload_as::<journal::ToolResult>()` for a `TOOL_RESULT`), or
    /// `None` when it does not have that type's fields.
    pub fn payload_as<'a, T: serde::Deserialize<'a>>(&'a self) -> Option<T> {
        T::deserialize(&self.payload).ok()
    }
}

/// One page as read from the host.
pub(crate) struct Page {
    pub(crate) events: Vec<Event>,
    pub(crate) next: Option<u64>,
}

/// Reads one page: events after `after`, at most `limit`.
type ReadPage = Box<dyn FnMut(Option<u64>, u32) -> Result<Page, Error>>;

/// The session's journal, oldest first, read page by page as it is iterated.
/// It includes this turn's own events so far (its TURN_STARTED, the input's
/// user message, and whatever the agent has written).
pub struct History {
    read: ReadPage,
    after: Option<u64>,
    buffer: VecDeque<Event>,
    done: bool,
}

impl History {
    pub(crate) fn new(read: ReadPage) -> Self {
        History {
            read,
            after: None,
            buffer: VecDeque::new(),
            done: false,
        }
    }

    /// The transcript: every finished message (MESSAGE_END), oldest first.
    pub fn messages(self) -> Result<Vec<ChatMessage>, Error> {
        let mut messages = Vec::new();
        for event in self {
            messages.extend(event?.chat_message());
        }
        Ok(messages)
    }
}

impl Iterator for History {
    type Item = Result<Event, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.buffer.is_empty() && !self.done {
            match (self.read)(self.after, PAGE_SIZE) {
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok(page) => {
                    // Stop on the last page, and on a host that makes no progress.
                    let progress = page.next.is_some_and(|n| Some(n) > self.after);
                    self.done = !progress || page.events.is_empty();
                    self.after = page.next;
                    self.buffer.extend(page.events);
                }
            }
        }
        self.buffer.pop_front().map(Ok)
    }
}

/// Reads a page from the host, parsing each payload.
pub(crate) fn read_from_host(after: Option<u64>, limit: u32) -> Result<Page, Error> {
    let page = host(host::read_history(after, limit))?;
    let events = page
        .events
        .into_iter()
        .map(|e| parse_event(e.seq, e.event_type, &e.payload))
        .collect::<Result<_, _>>()?;
    Ok(Page {
        events,
        next: page.next,
    })
}

/// Builds an event from its raw parts.
fn parse_event(seq: u64, event_type: String, payload: &str) -> Result<Event, Error> {
    let payload = serde_json::from_str(payload).map_err(|e| {
        Error::Other(format!(
            "the host sent event {seq} with a payload that is not JSON: {e}"
        ))
    })?;
    Ok(Event {
        seq,
        event_type,
        payload,
    })
}

impl Turn {
    /// The session's journal, read lazily page by page.
    pub fn history(&self) -> History {
        History::new(Box::new(read_from_host))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(seq: u64, event_type: &str, payload: Value) -> Event {
        parse_event(seq, event_type.into(), &payload.to_string()).unwrap()
    }

    /// A fake journal of `n` MESSAGE_END events, served `per_page` at a time.
    fn journal(n: u64, per_page: usize) -> History {
        let all: Vec<Event> = (1..=n)
            .map(|seq| {
                let role = if seq % 2 == 1 { "user" } else { "assistant" };
                let payload = json!({"message_id": format!("m{seq}"), "role": role, "text": format!("t{seq}")});
                event(seq, "MESSAGE_END", payload)
            })
            .collect();
        History::new(Box::new(move |after, _limit| {
            let rest: Vec<Event> = all
                .iter()
                .filter(|e| Some(e.seq) > after)
                .take(per_page)
                .cloned()
                .collect();
            let last = rest.last().map(|e| e.seq);
            let more = last.is_some_and(|l| l < n);
            Ok(Page {
                events: rest,
                next: if more { last } else { None },
            })
        }))
    }

    #[test]
    fn pages_are_read_in_order_until_the_last() {
        let seqs: Vec<u64> = journal(7, 3).map(|e| e.unwrap().seq).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(journal(0, 3).count(), 0);
    }

    #[test]
    fn messages_come_from_message_end_events() {
        let messages = journal(3, 2).messages().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[0].role, Role::User);
        assert_eq!(messages[1].role, Role::Assistant);
        assert_eq!(messages[2].text, "t3");

        let start = event(
            1,
            "MESSAGE_START",
            json!({"message_id": "m", "role": "user"}),
        );
        assert_eq!(start.chat_message(), None);
        let odd = event(
            2,
            "MESSAGE_END",
            json!({"message_id": "m", "role": "system", "text": "x"}),
        );
        assert_eq!(
            odd.chat_message().unwrap().role,
            Role::Other("system".into())
        );
    }

    #[test]
    fn errors_end_the_iteration_and_bad_payloads_are_errors() {
        let mut failing = History::new(Box::new(|_, _| Err(Error::from("storage down"))));
        assert!(matches!(failing.next(), Some(Err(_))));
        assert!(failing.next().is_none());
        assert!(parse_event(1, "TOOL_CALL".into(), "{oops").is_err());
    }

    #[test]
    fn a_host_that_makes_no_progress_does_not_loop() {
        let stuck = History::new(Box::new(|after, _| {
            Ok(Page {
                events: vec![],
                next: after.or(Some(0)),
            })
        }));
        assert_eq!(stuck.count(), 0);
    }
}
