//! The web console shows a session's schedules (docs/schedules.md) in a
//! real headless Chromium: the timer its agent set and one from the API
//! are listed, the transcript says what the agent scheduled and
//! cancelled, and the list follows the stream (a cancel removes the timer);
//! times read in the reader's zone, a schedule is deleted from its button;
//! the input of a turn a schedule started reads as scheduled, not typed.

use serde_json::json;

use crate::support::browser::Browser;
use crate::support::{self, KEY, Server};

async fn sign_in(browser: &Browser, key: &str) {
    let enter = char::from(fantoccini::key::Key::Enter);
    browser
        .fill(".signin input[type=password]", &format!("{key}{enter}"))
        .await;
}

#[tokio::test]
async fn a_sessions_schedules_are_listed_and_follow_the_stream() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("timers", &support::guest("timers")).await;
    // The agent sets a timer an hour ahead; the API adds one far ahead.
    let input = json!({"schedule_ms": 3_600_000, "then": {"say": "in an hour"}});
    let session = server.session("timers", "/timers", input).await;
    let first = (server.events(&session, None).await)
        .until(&["TURN_ENDED"])
        .await;
    let said = crate::support::agents::said(&first);
    let timer = said[0].strip_prefix("scheduled ").unwrap().to_string();
    let path = format!("/sessions/{session}/schedules");
    let body = json!({"at": "2099-01-01T09:00:00Z", "input": {"say": "far ahead"}});
    let (status, api) = server.post(&path, body).await;
    assert_eq!(status, 201, "{api}");
    let api = api["id"].as_str().unwrap().to_string();

    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    sign_in(&browser, KEY).await;
    browser.go(&format!("#/sessions/{session}")).await;
    let listed = |id: &str| {
        format!("document.querySelector('.schedules:not([hidden]) li[data-schedule-id=\"{id}\"]')")
    };
    browser
        .until(
            "the agent's timer listed",
            &format!("{} !== null", listed(&timer)),
        )
        .await;
    browser
        .until(
            "the API's schedule listed",
            &format!("{} !== null", listed(&api)),
        )
        .await;
    // Each with who made it.
    for (id, by) in [(&timer, "by the agent"), (&api, "by a platform key")] {
        let selector = format!(".schedules li[data-schedule-id=\"{id}\"] .created-by");
        browser.text_with(&selector, by).await;
    }
    let line = browser
        .text(&format!(
            ".transcript .line-scheduled[data-schedule-id=\"{timer}\"]"
        ))
        .await;
    assert!(
        line.contains("Scheduled for") && line.contains("in an hour"),
        "{line}"
    );
    assert_eq!(browser.text(".queued-count").await, "0");

    // A turn cancels the timer: gone from the list, said in the transcript.
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": {"cancel": timer}}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    browser
        .until(
            "the timer gone from the list",
            &format!("{} === null", listed(&timer)),
        )
        .await;
    browser
        .until(
            "the cancel in the transcript",
            &format!(
                "[...document.querySelectorAll('.transcript .line-scheduled[data-schedule-id=\"{timer}\"]')]
                    .some((l) => l.textContent.startsWith('Cancelled'))"
            ),
        )
        .await;
    assert_eq!(
        browser.js(&format!("{} !== null", listed(&api))).await,
        json!(true)
    );

    // Read as a person reads it: the time in the reader's zone (not the raw
    // RFC 3339), the input's text (not its JSON).
    let item = browser
        .text(&format!(".schedules li[data-schedule-id=\"{api}\"]"))
        .await;
    assert!(
        !item.contains("2099-01-01T09:00:00") && item.contains("2099"),
        "{item}"
    );
    assert!(
        item.contains("far ahead") && !item.contains("{\"say\""),
        "{item}"
    );
    // Deleted from the console: gone from the list and from the API.
    browser
        .click(&format!(
            ".schedules li[data-schedule-id=\"{api}\"] .delete-schedule"
        ))
        .await;
    browser
        .until(
            "the deleted schedule gone from the list",
            &format!("{} === null", listed(&api)),
        )
        .await;
    let (status, left) = server.get(&path).await;
    assert_eq!(status, 200, "{left}");
    assert_eq!(left, json!([]), "{left}");
    browser.assert_no_errors("following schedules").await;
}

/// A schedule that comes due starts a turn whose input the transcript
/// shows as scheduled (not as something the user typed just now).
#[tokio::test]
async fn a_scheduled_input_reads_as_scheduled() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("timers", &support::guest("timers")).await;
    let session = server
        .session(
            "timers",
            "/timers",
            json!({"say": "typed", "text": "typed"}),
        )
        .await;
    (server.events(&session, None).await)
        .until(&["TURN_ENDED"])
        .await;
    let at = humantime::format_rfc3339_millis(
        std::time::SystemTime::now() + std::time::Duration::from_secs(1),
    )
    .to_string();
    let path = format!("/sessions/{session}/schedules");
    let (status, body) = server
        .post(
            &path,
            // `text` makes the input a user message (docs/events.md).
            json!({"at": at, "input": {"say": "soon", "text": "from the schedule"}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    sign_in(&browser, KEY).await;
    browser.go(&format!("#/sessions/{session}")).await;
    browser
        .until(
            "the scheduled turn's input drawn as scheduled",
            "document.querySelector('.msg-scheduled .who')?.textContent === 'Scheduled input'",
        )
        .await;
    let users = browser
        .js("[...document.querySelectorAll('.msg-user .who')].map((w) => w.textContent)")
        .await;
    assert_eq!(users, json!(["User", "Scheduled input"]));
    let turns = browser
        .js("[...document.querySelectorAll('.line-turn')].map((l) => l.textContent)")
        .await;
    assert_eq!(turns, json!(["Turn 1", "Turn 2 · a schedule came due"]));
    browser.assert_no_errors("a scheduled turn").await;
}
