//! Decision-link pages as a phone shows them: a real headless Chromium at
//! 390 × 844 opens the links of a signed `approval.requested` (verified by
//! the Standard Webhooks reference library) and sees a styled page in every
//! state: pending (the agent's reason, the requester, the link's end, a
//! message field on deny, no backticks in the title, nothing wider than the
//! screen), just decided, decided before (by whom, when), session ended,
//! revoked, expired and not a link. The deny's message reaches the journal.
//! API clients (no `text/html` in `Accept`) still get JSON errors. With
//! `AGENTHOST_CONSOLE_SCREENSHOTS=docs/console` the pages are saved as
//! `decision-<state>-{phone,laptop}.png`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::browser::{Browser, PHONE};
use crate::support::{self, Server, leaks};
use crate::webhooks::{FAST, Receiver, create, deploy_ops, links, suspended};

/// Opens `url` at phone width and checks what every state's page shares:
/// a viewport, the system font at 16 px, nothing wider than the screen, no
/// script errors or CSP reports (failed loads are the refusals' statuses). Returns the page's text.
async fn open(browser: &Browser, url: &str) -> String {
    browser.resize(PHONE).await;
    browser.goto(url).await;
    page_checks(browser).await
}

async fn page_checks(browser: &Browser) -> String {
    let fits = browser
        .js("document.documentElement.scrollWidth <= window.innerWidth")
        .await;
    assert_eq!(fits, json!(true), "the page is wider than a phone");
    let font = browser.js("getComputedStyle(document.body).fontSize").await;
    assert_eq!(font, json!("16px"));
    let family = browser
        .js("getComputedStyle(document.body).fontFamily")
        .await;
    assert!(
        family.as_str().unwrap_or_default().contains("system-ui"),
        "{family}"
    );
    let viewport = browser
        .js("document.querySelector('meta[name=viewport]')?.content ?? ''")
        .await;
    assert!(
        viewport
            .as_str()
            .unwrap_or_default()
            .contains("width=device-width"),
        "{viewport}"
    );
    let title = browser.js("document.title").await;
    assert!(!title.as_str().unwrap_or_default().contains('`'), "{title}");
    // A refusal's page comes with its status (409, 410, 404), which the
    // browser logs as a failed load: that is the point, not an error.
    let errors: Vec<Value> = (browser.errors().await.into_iter())
        .filter(|e| e["source"] != "network")
        .collect();
    assert!(errors.is_empty(), "the page logged {errors:#?}");
    browser
        .js("document.body.innerText")
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn token(link: &str) -> &str {
    link.split("t=").nth(1).unwrap_or_default()
}

#[tokio::test]
async fn decision_pages_read_well_on_a_phone_in_every_state() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let server = Server::start_with(dir.path(), FAST).await;
    deploy_ops(&server, "ops", None).await;
    let url = format!("{}/pages", receiver.url);
    let body = json!({"url": url, "events": ["approval.requested"], "decision_links": true});
    let (id, secret) = create(&server, body).await;
    receiver.config("/pages", &[&secret], 0, 500, 200).await;
    let session = suspended(&server, "ops").await;
    let (approve, deny) = links(&receiver, "/pages", &session).await;
    leaks::used("decision link", token(&approve));
    leaks::used("decision link", token(&deny));
    let browser = Browser::start().await;

    // Pending: what is asked, why, by whom, until when; deny takes a message.
    let text = open(&browser, &deny).await;
    for needed in [
        "Deny the call of delete_record?",
        "The agent says why",
        "Requested by",
        "an API key",
        "Link valid until",
        " UTC",
        "apples",
        "Message to the agent",
    ] {
        assert!(text.contains(needed), "`{needed}` in:\n{text}");
    }
    assert_eq!(
        browser.js("document.title").await,
        json!("Deny the call of delete_record?")
    );
    browser.screenshot("decision-pending", None).await;
    let text = open(&browser, &approve).await;
    assert!(
        text.contains("Approve the call of delete_record?"),
        "{text}"
    );
    let message_fields = browser
        .js("document.querySelectorAll('textarea').length")
        .await;
    assert_eq!(message_fields, json!(0), "approve takes no message");

    // Decide from the phone: deny, with a message for the agent.
    open(&browser, &deny).await;
    browser
        .fill("#message", "not the apples, ask me tomorrow")
        .await;
    browser.click("button[type=submit]").await;
    browser
        .until(
            "the page after deciding",
            "document.title.startsWith('Denied')",
        )
        .await;
    let text = page_checks(&browser).await;
    assert!(
        text.contains("The call of delete_record was denied."),
        "{text}"
    );
    browser.screenshot("decision-done", None).await;
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    let denied = events
        .iter()
        .find(|e| e["type"] == "TOOL_APPROVAL_DENIED")
        .expect("the denial");
    assert_eq!(
        denied["payload"]["message"],
        "not the apples, ask me tomorrow"
    );
    assert_eq!(denied["payload"]["approver"], format!("webhook:{id}"));

    // Decided before: the other link says by whom and when, as a page (409).
    let text = open(&browser, &approve).await;
    assert!(
        text.contains("was already denied") && text.contains("by a decision link at"),
        "{text}"
    );
    browser.screenshot("decision-decided", None).await;
    // An API client gets the same refusal as JSON.
    let anonymous = reqwest::Client::new();
    let refused = anonymous.get(&approve).send().await.unwrap();
    assert_eq!(refused.status(), 409);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "conflict", "{body}");
    assert!(
        (body["error"]["message"].as_str().unwrap_or_default())
            .contains(&format!("denied by webhook:{id}")),
        "{body}"
    );
    let as_browser = anonymous
        .get(&approve)
        .header("accept", "text/html,application/xhtml+xml")
        .send()
        .await
        .unwrap();
    assert_eq!(as_browser.status(), 409);
    assert!(
        as_browser.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );

    // The session ended while its call waited: the link says so.
    let ended = suspended(&server, "ops").await;
    let (approve, _) = links(&receiver, "/pages", &ended).await;
    leaks::used("decision link", token(&approve));
    let (status, body) = server
        .post(&format!("/sessions/{ended}/end"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let text = open(&browser, &approve).await;
    assert!(text.contains("no longer waiting for a decision"), "{text}");
    browser.screenshot("decision-ended", None).await;

    // Not a link.
    let text = open(&browser, &server.url("/decision-links?t=not-a-link")).await;
    assert!(text.contains("This link is not valid."), "{text}");
    browser.screenshot("decision-invalid", None).await;

    // Revoked by a rotation of the endpoint's secret.
    let revoked = suspended(&server, "ops").await;
    let (approve, _) = links(&receiver, "/pages", &revoked).await;
    leaks::used("decision link", token(&approve));
    let (status, rotated) = server
        .post(&format!("/webhooks/{id}/rotate"), json!({"grace_secs": 60}))
        .await;
    assert_eq!(status, 200, "{rotated}");
    leaks::used("webhook secret", rotated["secret"].as_str().unwrap());
    let text = open(&browser, &approve).await;
    assert!(text.contains("This link was revoked."), "{text}");
    browser.screenshot("decision-revoked", None).await;
}

#[tokio::test]
async fn an_expired_link_shows_an_expired_page() {
    let receiver = Receiver::start();
    let dir = support::data_dir();
    let flags = [FAST, &["--decision-link-ttl", "1s"]].concat();
    let server = Server::start_with(dir.path(), &flags).await;
    deploy_ops(&server, "ops", None).await;
    let url = format!("{}/expired-pages", receiver.url);
    let body = json!({"url": url, "events": ["approval.requested"], "decision_links": true});
    let (_, secret) = create(&server, body).await;
    receiver
        .config("/expired-pages", &[&secret], 0, 500, 200)
        .await;
    let session = suspended(&server, "ops").await;
    let (approve, _) = links(&receiver, "/expired-pages", &session).await;
    leaks::used("decision link", token(&approve));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let browser = Browser::start().await;
    let text = open(&browser, &approve).await;
    assert!(text.contains("This link has expired."), "{text}");
    browser.screenshot("decision-expired", None).await;
    // Posting the form anyway decides nothing.
    let refused = reqwest::Client::new()
        .post(&approve)
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 410);
    let (_, view) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(view["status"], "awaiting_approval");
}
