//! `EndUser`: who the session serves, read from its first journal event
//! (SESSION_CREATED records the end user and the claims the app allows).

use serde_json::{Map, Value};

use crate::error::Error;
use crate::history::{Event, Page, read_from_host};
use crate::journal;
use crate::turn::Turn;

/// The end user a session belongs to (docs/end-users.md): the person who
/// created it with an end-user token.
#[derive(Debug, Clone, PartialEq)]
pub struct EndUser {
    /// Their id in the app (the token's user, or its `sub`).
    pub id: String,
    /// The claims of their token that the app's manifest lists in
    /// `[end_users] claims` (the others never reach the agent); empty when
    /// it lists none.
    pub claims: Map<String, Value>,
}

impl Turn {
    /// The end user this session serves, or `None` when it was created with
    /// an API key (an invocation or platform key) rather than by an end user.
    ///
    /// Each call reads the journal's first event (one `read-history` call).
    pub fn end_user(&self) -> Result<Option<EndUser>, Error> {
        end_user_in(&mut read_from_host)
    }
}

/// Reads the journal's first event with `read` and takes its end user.
fn end_user_in(
    read: &mut dyn FnMut(Option<u64>, u32) -> Result<Page, Error>,
) -> Result<Option<EndUser>, Error> {
    let page = read(None, 1)?;
    match page.events.first() {
        Some(first) => from_session_created(first),
        None => Err(Error::Other(
            "the session's journal has no SESSION_CREATED event".into(),
        )),
    }
}

/// The end user of a SESSION_CREATED event (`None` when it records none).
fn from_session_created(event: &Event) -> Result<Option<EndUser>, Error> {
    if event.event_type != journal::SESSION_CREATED {
        return Err(Error::Other(format!(
            "the session's journal opens with {} instead of SESSION_CREATED",
            event.event_type
        )));
    }
    let user = match event.payload.get("end_user") {
        None | Some(Value::Null) => return Ok(None),
        Some(user) => user,
    };
    let malformed = || Error::Other(format!("SESSION_CREATED has a malformed end_user: {user}"));
    let id = user
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(malformed)?;
    let claims = match user.get("claims") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(claims)) => claims.clone(),
        Some(_) => return Err(malformed()),
    };
    Ok(Some(EndUser {
        id: id.to_owned(),
        claims,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A journal whose first event is `first`, recording what was asked.
    fn first_is(
        first: Event,
        asked: &mut Vec<(Option<u64>, u32)>,
    ) -> impl FnMut(Option<u64>, u32) -> Result<Page, Error> + '_ {
        move |after, limit| {
            asked.push((after, limit));
            Ok(Page {
                events: vec![first.clone()],
                next: Some(0),
            })
        }
    }

    fn created(payload: Value) -> Event {
        Event {
            seq: 0,
            event_type: "SESSION_CREATED".into(),
            payload,
        }
    }

    #[test]
    fn the_end_user_and_claims_come_from_session_created() {
        let mut asked = Vec::new();
        let event = created(json!({"app": "shop", "route": "/chat", "input": "hi",
            "end_user": {"id": "ada", "claims": {"email": "ada@example.com", "plan": "pro"}}}));
        let user = end_user_in(&mut first_is(event, &mut asked))
            .unwrap()
            .unwrap();
        assert_eq!(user.id, "ada");
        assert_eq!(user.claims["email"], "ada@example.com");
        assert_eq!(user.claims["plan"], "pro");
        // One read: the first event alone.
        assert_eq!(asked, vec![(None, 1)]);

        // No claims listed: the journal leaves `claims` out.
        let bare = created(json!({"app": "shop", "end_user": {"id": "bob"}}));
        let user = end_user_in(&mut first_is(bare, &mut asked))
            .unwrap()
            .unwrap();
        assert_eq!((user.id.as_str(), user.claims.len()), ("bob", 0));
    }

    #[test]
    fn a_session_created_with_a_key_has_no_end_user() {
        let event = created(json!({"app": "shop", "route": "/chat", "input": null}));
        assert_eq!(end_user_in(&mut first_is(event, &mut Vec::new())), Ok(None));
    }

    #[test]
    fn an_unexpected_journal_is_an_error() {
        let mut asked = Vec::new();
        let other = Event {
            seq: 0,
            event_type: "TURN_STARTED".into(),
            payload: json!({}),
        };
        assert!(end_user_in(&mut first_is(other, &mut asked)).is_err());
        let bad = created(json!({"end_user": {"id": 7}}));
        assert!(end_user_in(&mut first_is(bad, &mut asked)).is_err());
        let bad = created(json!({"end_user": {"id": "ada", "claims": ["email"]}}));
        assert!(end_user_in(&mut first_is(bad, &mut asked)).is_err());
        let empty = &mut |_, _| {
            Ok(Page {
                events: vec![],
                next: None,
            })
        };
        assert!(end_user_in(empty).is_err());
        let failing = &mut |_, _| Err(Error::from("storage down"));
        assert_eq!(end_user_in(failing), Err(Error::from("storage down")));
    }
}
