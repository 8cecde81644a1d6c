//! The web console (`GET /`), as a person uses it in a real headless
//! Chromium: sign in, deployments and rollback, sessions streaming live and
//! resuming after a drop, gated calls approved inline and from the inbox,
//! API keys and secrets, and a revoked key refused. Also its headers.
//!
//! With `AGENTHOST_CONSOLE_SCREENSHOTS=docs/console`, the walk saves the
//! screenshots shown in the README (see docs/console.md).

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::browser::Browser;
use crate::support::{self, KEY, Server};

/// Signs in on the sign-in page with `key`, submitting with the Enter key.
async fn sign_in(browser: &Browser, key: &str) {
    let enter = char::from(fantoccini::key::Key::Enter);
    browser
        .fill(".signin input[type=password]", &format!("{key}{enter}"))
        .await;
}

/// The text of the newest finished assistant message, once it says `text`.
async fn agent_says(browser: &Browser, text: &str) {
    browser
        .until(
            &format!("the agent to say `{text}`"),
            &format!(
                "[...document.querySelectorAll('.msg[data-role=assistant]:not(.streaming) .text')]
                    .some((m) => m.textContent === {})",
                json!(text)
            ),
        )
        .await;
}

/// The session's status as the session view shows it, once it is `status`.
async fn status_is(browser: &Browser, status: &str) {
    browser
        .until(
            &format!("the session to be {status}"),
            &format!(
                "document.querySelector('.session-status')?.dataset.status === {}",
                json!(status)
            ),
        )
        .await;
}

/// Sends `text` from the session view's message box, with the Enter key.
async fn send(browser: &Browser, text: &str) {
    browser
        .until(
            "the Send button to be enabled",
            "document.querySelector('.composer button')?.disabled === false",
        )
        .await;
    let enter = char::from(fantoccini::key::Key::Enter);
    browser
        .fill(".composer textarea", &format!("{text}{enter}"))
        .await;
}

/// The browser logged nothing but failed network requests (expected while
/// the server is down or a key is refused), each matching `expected`.
async fn only_network_errors(browser: &Browser, during: &str, expected: &[&str]) {
    for entry in browser.errors().await {
        let message = entry["message"].as_str().unwrap_or_default();
        assert!(
            entry["source"] == "network" && expected.iter().any(|e| message.contains(e)),
            "unexpected browser error during {during}: {entry}"
        );
    }
}

#[tokio::test]
async fn a_person_deploys_watches_sessions_live_and_decides_gated_calls() {
    let dir = support::data_dir();
    let mut server = Server::start(dir.path()).await;
    let hello = support::guest("hello");
    server.deploy("hello", &hello).await;
    server.deploy("hello", &hello).await;
    server.deploy("ops", &support::guest("ops")).await;
    let manifest = "[app]\nslug = \"broken\"\n[agent]\nentry = \"agent.wasm\"\n";
    let (status, row) = server
        .upload(
            support::bundle(&[("agent.wasm", b"not a component")]),
            manifest,
        )
        .await;
    assert_eq!(status, 202, "{row}");
    assert_eq!(server.wait_built(&row).await["status"], "failed");

    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;

    // Sign in: a bad key is refused, the platform key gets in.
    browser.find(".signin input[type=password]").await;
    browser.screenshot("signin", None).await;
    sign_in(&browser, "not-a-key").await;
    browser.text_with(".notice-error", "refused").await;
    only_network_errors(&browser, "a refused sign-in", &["status of 401"]).await;
    sign_in(&browser, KEY).await;

    // Deployments: versions, statuses, the build error; roll back.
    browser
        .until(
            "three apps",
            "document.querySelectorAll('section[data-app]').length === 3",
        )
        .await;
    let hello_v2 = "section[data-app=hello] tr[data-version='2']";
    let hello_v1 = "section[data-app=hello] tr[data-version='1']";
    assert_eq!(
        browser
            .find(hello_v2)
            .await
            .attr("data-status")
            .await
            .unwrap(),
        Some("active".into())
    );
    assert_eq!(
        browser
            .find(hello_v1)
            .await
            .attr("data-status")
            .await
            .unwrap(),
        Some("retired".into())
    );
    let error = browser.text("section[data-app=broken] .build-error").await;
    assert!(!error.trim().is_empty(), "the build error is shown");
    assert!(
        browser
            .text("section[data-app=broken] tr[data-version='1']")
            .await
            .contains("failed")
    );
    browser
        .text_with("#who-name", "Signed in as bootstrap")
        .await;
    browser.screenshot("deployments", None).await;
    browser
        .click_labelled("section[data-app=hello]", "Roll back to v1")
        .await;
    browser
        .until(
            "v1 to be current",
            "document.querySelector(\"section[data-app=hello] tr[data-version='1']\")?.dataset.status === 'active'",
        )
        .await;
    let (_, app) = server.get("/apps/hello").await;
    assert_eq!(app["current_deployment"]["version"], 1, "{app}");

    // A new session from the console; the reply is drawn from its deltas.
    browser.go("#/sessions").await;
    browser
        .select(".new-session select[name=app]", "hello")
        .await;
    browser
        .select(".new-session select[name=route]", "/chat")
        .await;
    browser
        .fill(".new-session input[name=input]", "hi there")
        .await;
    browser
        .click_labelled(".new-session", "Start session")
        .await;
    agent_says(&browser, "You said: hi there").await;
    status_is(&browser, "idle").await;
    let session = browser
        .js("location.hash.split('/')[2]")
        .await
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        browser
            .js("document.querySelector('.msg[data-role=assistant]').dataset.deltas")
            .await,
        "3"
    );
    browser
        .until(
            "the stream to be live",
            "document.querySelector('.connection').dataset.state === 'live'",
        )
        .await;

    // Live: an input sent by someone else appears delta by delta.
    browser
        .js("(() => { window.seen = []; new MutationObserver((records) => {
            for (const r of records) for (const n of r.addedNodes)
              if (n.nodeType === Node.TEXT_NODE && n.parentElement.closest('.msg[data-role=assistant]'))
                window.seen.push(n.data);
          }).observe(document.querySelector('.transcript'), {childList: true, subtree: true}); })()")
        .await;
    let (status, _) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "arrives live now"}),
        )
        .await;
    assert_eq!(status, 202);
    agent_says(&browser, "You said: arrives live now").await;
    assert_eq!(
        browser.js("window.seen").await,
        json!([
            "You said:",
            " arrives",
            " live",
            " now",
            "You said: arrives live now"
        ]),
        "each delta is drawn as it arrives, then the final text"
    );
    send(&browser, "typed here").await;
    agent_says(&browser, "You said: typed here").await;
    browser
        .assert_no_errors("sign-in, deployments and a live session")
        .await;

    // A drop: the server stops and comes back on the same address; the
    // console reconnects with a new stream token after the last event it saw.
    let addr = server.url.trim_start_matches("http://").to_string();
    server.terminate();
    server.wait_exit(Duration::from_secs(30)).await;
    drop(server);
    browser
        .until(
            "the console to notice the drop",
            "document.querySelector('.connection').dataset.state === 'reconnecting'",
        )
        .await;
    let server = Server::start_at(dir.path(), &addr, &[]).await;
    let resumed = browser
        .until(
            "the stream to resume",
            "document.querySelector('.connection').dataset.state === 'live'
               && document.querySelector('.connection').textContent",
        )
        .await;
    let (_, current) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(current["status"], "idle", "{current}");
    assert!(
        resumed.as_str().unwrap().contains("resumed after event"),
        "{resumed}"
    );
    let (status, _) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": "after the drop"}),
        )
        .await;
    assert_eq!(status, 202);
    agent_says(&browser, "You said: after the drop").await;
    let messages = browser
        .js("[...document.querySelectorAll('.msg .text')].map((m) => m.textContent)")
        .await;
    assert_eq!(
        messages,
        json!([
            "hi there",
            "You said: hi there",
            "arrives live now",
            "You said: arrives live now",
            "typed here",
            "You said: typed here",
            "after the drop",
            "You said: after the drop"
        ]),
        "every message once, in order, across the drop"
    );
    only_network_errors(&browser, "the drop", &["net::ERR_"]).await;

    // A gated call of examples/ops, approved inline with a named approver.
    browser.go("#/sessions").await;
    browser.select(".new-session select[name=app]", "ops").await;
    browser
        .select(".new-session select[name=route]", "/ops")
        .await;
    browser
        .fill(".new-session input[name=input]", "add apples pears")
        .await;
    browser
        .click_labelled(".new-session", "Start session")
        .await;
    agent_says(
        &browser,
        "Added apples. Added pears. Records: apples, pears.",
    )
    .await;
    send(&browser, "delete apples").await;
    status_is(&browser, "awaiting_approval").await;
    let card = ".tool.gated.pending[data-tool=delete_record]";
    let pending = browser.text(card).await;
    assert!(
        pending.contains("the user asked to delete apples") && pending.contains("code"),
        "{pending}"
    );
    // The decision takes the message box's place while the call waits.
    browser
        .until(
            "the decision where the box was",
            "!document.querySelector('.composer').checkVisibility()
               && document.querySelector('.decision-dock').checkVisibility()",
        )
        .await;
    assert!(
        browser
            .text(".decision-dock")
            .await
            .contains("delete_record")
    );
    browser.screenshot("session", Some(card)).await;

    // The inbox lists it across apps, with the count in the header.
    browser.click("nav a[data-view=approvals]").await;
    let item = browser.text(".inbox-item[data-tool=delete_record]").await;
    assert!(item.contains("ops") && item.contains("apples"), "{item}");
    // Who asked: an API key opened this session (no end user).
    let asked_by = browser
        .text(".inbox-item[data-tool=delete_record] .asked-by")
        .await;
    assert_eq!(asked_by, "an API key");
    browser
        .until(
            "the pending count",
            "document.querySelector('#approvals-count').dataset.pending === '1'",
        )
        .await;
    browser.screenshot("approvals", None).await;
    // Live, without polling: a request made elsewhere appears, and leaves
    // once decided elsewhere (the inbox follows GET /approvals/events).
    let other = server.session("ops", "/ops", json!("add kiwis")).await;
    let mut other_events = server.events(&other, None).await;
    other_events.until(&["TURN_ENDED"]).await;
    let (status, _) = server
        .post(
            &format!("/sessions/{other}/input"),
            json!({"input": "delete kiwis"}),
        )
        .await;
    assert_eq!(status, 202);
    let kiwis = format!(".inbox-item[data-session='{other}']");
    assert!(browser.text(&kiwis).await.contains("kiwis"));
    // The header's count follows the same feed.
    browser
        .until(
            "the pending count to be 2",
            "document.querySelector('#approvals-count').dataset.pending === '2'",
        )
        .await;
    let (status, _) = server
        .post(
            &format!("/sessions/{other}/approval"),
            json!({"approved": false}),
        )
        .await;
    assert_eq!(status, 202);
    browser
        .text_with(&format!("{kiwis} .outcome"), "Denied by")
        .await;
    browser
        .until(
            "the pending count to be 1 again",
            "document.querySelector('#approvals-count').dataset.pending === '1'",
        )
        .await;
    // Ended, so that the sessions list below shows the two sessions of the person.
    other_events.until(&["TURN_ENDED"]).await;
    let (status, _) = server
        .post(&format!("/sessions/{other}/end"), json!({}))
        .await;
    assert_eq!(status, 200);
    browser.client.back().await.unwrap();
    browser
        .fill(".decision-dock input[name=approver]", "alice")
        .await;
    browser.click_labelled(".decision-dock", "Approve").await;
    agent_says(&browser, "Deleted apples. Records: pears.").await;
    let decided = browser
        .text(".tool[data-tool=delete_record][data-decision=approved][data-result=ok]")
        .await;
    assert!(decided.contains("Approved by alice"), "{decided}");
    status_is(&browser, "idle").await;

    // Denied from the inbox; the session shows the resumed turn.
    send(&browser, "delete pears").await;
    status_is(&browser, "awaiting_approval").await;
    browser.click("nav a[data-view=approvals]").await;
    let inbox_card = ".inbox-item[data-tool=delete_record]";
    browser
        .fill(&format!("{inbox_card} input[name=approver]"), "bob")
        .await;
    browser.click_labelled(inbox_card, "Deny").await;
    browser
        .text_with(&format!("{inbox_card} .outcome"), "Denied by bob")
        .await;
    // Its badge no longer says it awaits approval.
    assert_eq!(
        browser
            .js(&format!(
                "document.querySelector(\"{inbox_card} .inbox-status\").dataset.status"
            ))
            .await,
        "running"
    );
    assert!(
        !browser
            .text(&format!("{inbox_card} .inbox-status"))
            .await
            .contains("awaiting")
    );
    browser.click_labelled(inbox_card, "Watch it").await;
    agent_says(
        &browser,
        "The deletion of pears was denied by bob. Records: pears.",
    )
    .await;
    assert!(
        browser
            .text(".tool[data-decision=denied][data-result=denied]")
            .await
            .contains("Denied by bob")
    );
    let (_, approvals) = server.get("/approvals").await;
    assert_eq!(approvals["items"], json!([]), "nothing left pending");

    // The sessions list, with both sessions and their live statuses.
    browser.go("#/sessions").await;
    browser
        .until(
            "both sessions listed as idle",
            "document.querySelectorAll('tr[data-session][data-status=idle]').length === 2",
        )
        .await;
    browser.screenshot("sessions", None).await;
    browser.assert_no_errors("sessions and approvals").await;
}

#[tokio::test]
async fn keys_and_secrets_are_managed_and_a_revoked_key_is_refused() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("hello", &support::guest("hello")).await;
    let browser = Browser::start().await;
    browser.goto(&server.url("/#/keys")).await;
    sign_in(&browser, KEY).await;

    // A platform key: its secret is shown once, works, and leaves the page.
    browser.find("section .rows").await;
    browser.select("select[name=class]", "platform").await;
    browser.fill("input[name=name]", "laptop").await;
    browser.click_labelled("form", "Create key").await;
    let laptop = browser
        .until(
            "the new key",
            "document.querySelector('.minted input.secret')?.value",
        )
        .await
        .as_str()
        .unwrap()
        .to_string();
    assert!(laptop.starts_with("ahp_"), "{laptop}");
    let (status, _) = server.get_as(&laptop, "/apps").await;
    assert_eq!(status, 200, "the key shown works");
    browser.find("tr[data-name=laptop]").await;
    browser.screenshot("keys", None).await;
    browser.click_labelled(".minted", "I have saved it").await;
    let source = browser.client.source().await.unwrap();
    assert!(!source.contains(&laptop), "the secret left the page");

    // An invocation key, then revoked from the console.
    browser.select("select[name=class]", "invocation").await;
    browser.select("select[name=app]", "hello").await;
    browser.fill("input[name=name]", "web frontend").await;
    browser.click_labelled("form", "Create key").await;
    let frontend = browser
        .until(
            "the new key",
            "document.querySelector('.minted input.secret')?.value",
        )
        .await
        .as_str()
        .unwrap()
        .to_string();
    assert!(frontend.starts_with("ahi_"), "{frontend}");
    browser.click_labelled(".minted", "I have saved it").await;
    let row = "tr[data-name='web frontend']";
    assert!(browser.text(row).await.contains("hello"));
    browser.click_labelled(row, "Revoke").await;
    browser.click_labelled(row, "Revoke web frontend").await;
    browser
        .until(
            "the revoked key to leave the list",
            "!document.querySelector(\"tr[data-name='web frontend']\")",
        )
        .await;
    let (status, _) = server
        .post_as(
            &frontend,
            "/sessions",
            json!({"app": "hello", "route": "/chat", "input": "hi"}),
        )
        .await;
    assert_eq!(status, 401, "revoked at once");

    // Secrets: set, rotated, listed by name only, deleted.
    let value = "sk-console-secret-value-42";
    browser.click("nav a[data-view=secrets]").await;
    browser.fill("input[name=name]", "OPENAI_API_KEY").await;
    browser.fill("input[name=value]", value).await;
    browser.click_labelled("form", "Set secret").await;
    browser
        .text_with(".notice-ok", "Created OPENAI_API_KEY")
        .await;
    browser.find("tr[data-secret=OPENAI_API_KEY]").await;
    browser.fill("input[name=name]", "OPENAI_API_KEY").await;
    browser
        .fill("input[name=value]", "sk-rotated-value-43")
        .await;
    browser.click_labelled("form", "Set secret").await;
    browser
        .until(
            "the rotation",
            "document.querySelector('.notice-ok')?.textContent.includes('Rotated OPENAI_API_KEY')",
        )
        .await;
    let source = browser.client.source().await.unwrap();
    assert!(
        !source.contains(value) && !source.contains("sk-rotated-value-43"),
        "no value on the page"
    );
    assert_eq!(
        browser
            .js("document.querySelector('input[name=value]').value")
            .await,
        "",
        "the value field is cleared"
    );
    browser.screenshot("secrets", None).await;
    browser
        .click_labelled("tr[data-secret=OPENAI_API_KEY]", "Delete")
        .await;
    browser
        .click_labelled("tr[data-secret=OPENAI_API_KEY]", "Delete OPENAI_API_KEY")
        .await;
    browser
        .until(
            "the secret to leave the list",
            "!document.querySelector('tr[data-secret=OPENAI_API_KEY]')",
        )
        .await;
    let (_, secrets) = server.get("/secrets").await;
    assert_eq!(secrets, json!([]));
    browser.assert_no_errors("keys and secrets").await;

    // An invocation key cannot sign in; the laptop key can.
    browser.click("#sign-out").await;
    let (_, invocation) = server
        .mint_key("invocation", "another frontend", Some("hello"))
        .await;
    sign_in(&browser, &invocation).await;
    let said = browser
        .text_with(".notice-error", "The console needs a platform key")
        .await;
    assert!(said.contains("This is an invocation key"), "{said}");
    // An end-user token is told for what it is, not called a key.
    let token = server.end_user_token("hello", "ada").await;
    sign_in(&browser, &token).await;
    let said = browser
        .text_with(".notice-error", "This is an end-user token")
        .await;
    assert!(said.contains("The console needs a platform key"), "{said}");
    sign_in(&browser, &laptop).await;
    browser
        .until(
            "signed in as laptop",
            "document.querySelector('#who-name').textContent === 'Signed in as laptop'",
        )
        .await;
    only_network_errors(&browser, "an invocation key's sign-in", &["status of 403"]).await;

    // Revoked elsewhere while the console sits idle on a view that makes no
    // calls of its own (keys): the header's approvals feed ends, its
    // reconnection is refused, and the console says so.
    browser.click("nav a[data-view=keys]").await;
    browser.find("tr[data-name=laptop]").await;
    let laptop_id = laptop.split('_').nth(1).unwrap();
    assert_eq!(server.delete(&format!("/api-keys/{laptop_id}")).await, 204);
    browser
        .text_with(".signin .notice-error", "The server refused your key")
        .await;
    assert_eq!(
        browser.js("sessionStorage.length").await,
        0,
        "the refused key is forgotten"
    );
    sign_in(&browser, &laptop).await;
    browser
        .text_with(".notice-error", "unknown, malformed or revoked")
        .await;

    // Revoking one's own key from the console signs one out.
    let (_, temp) = server.mint_key("platform", "temp", None).await;
    sign_in(&browser, &temp).await;
    browser.click("nav a[data-view=keys]").await;
    browser.click_labelled("tr[data-name=temp]", "Revoke").await;
    assert!(
        browser
            .text("tr[data-name=temp]")
            .await
            .contains("This is your key")
    );
    browser
        .click_labelled("tr[data-name=temp]", "Revoke temp")
        .await;
    browser
        .text_with(".signin .notice-error", "The server refused your key")
        .await;
    let (status, _) = server.get_as(&temp, "/apps").await;
    assert_eq!(status, 401);
    only_network_errors(&browser, "revoked keys", &["status of 401"]).await;
}

#[tokio::test]
async fn the_console_is_served_with_strict_headers() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let page = server.client.get(server.url("/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let headers = page.headers().clone();
    let header = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert!(header("content-type").starts_with("text/html"));
    let csp = header("content-security-policy");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
    ] {
        assert!(csp.contains(directive), "{csp}");
    }
    assert!(!csp.contains("unsafe"), "{csp}");
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert_eq!(header("referrer-policy"), "no-referrer");
    assert_eq!(header("cache-control"), "no-cache");
    let html = page.text().await.unwrap();
    assert!(
        !html.contains("<script>") && !html.contains(" style="),
        "no inline script or style"
    );

    // Every script and stylesheet the page names is served with its type.
    for (path, kind) in [
        ("/console/app.js", "text/javascript"),
        ("/console/console.css", "text/css"),
        ("/console/icon.svg", "image/svg+xml"),
    ] {
        assert!(html.contains(path), "{path}");
        let response = server.client.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let etag = response.headers()["etag"].clone();
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with(kind)
        );
        let again = server
            .client
            .get(server.url(path))
            .header("if-none-match", etag)
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path} revalidates");
    }
    let (status, body): (u16, Value) = support::status_and_json(
        server
            .client
            .get(server.url("/console/nope.js"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, &body["error"]["code"]), (404, &json!("not_found")));
}

#[tokio::test]
async fn an_operator_cancels_a_running_turn_and_ends_the_session() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("slow", &support::guest("slow")).await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 60_000}))
        .await;
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    sign_in(&browser, KEY).await;
    browser.go(&format!("#/sessions/{session}")).await;
    status_is(&browser, "running").await;
    browser
        .click_labelled(".session-actions", "Cancel turn")
        .await;
    status_is(&browser, "errored").await;
    let error = browser.text(".turn-error[data-kind=cancelled]").await;
    assert!(error.contains("cancelled by an operator"), "{error}");
    // Ending asks once more, then ends the session for good.
    browser
        .click_labelled(".session-actions", "End session")
        .await;
    browser
        .click_labelled(".session-actions", "End for good")
        .await;
    status_is(&browser, "ended").await;
    let ended = browser.text(".transcript .ended").await;
    assert!(ended.contains("ended from the console"), "{ended}");
    let (_, view) = server.get(&format!("/sessions/{session}")).await;
    assert_eq!(view["status"], "ended", "{view}");
    browser.assert_no_errors("cancelling and ending").await;
}

#[tokio::test]
async fn a_message_sent_while_a_turn_runs_is_queued_and_runs_after_it() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("slow", &support::guest("slow")).await;
    let session = server
        .session("slow", "/slow", json!({"sleep_ms": 60_000}))
        .await;
    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    sign_in(&browser, KEY).await;
    browser.go(&format!("#/sessions/{session}")).await;
    status_is(&browser, "running").await;
    let button = browser.text(".composer button").await;
    assert_eq!(button, "Queue");
    // The slow agent sleeps its default three seconds on a text input.
    send(&browser, "and then this").await;
    browser
        .until(
            "the queued message in the transcript",
            "document.querySelector('.transcript .line-queued')?.textContent.includes('runs next')",
        )
        .await;
    browser
        .click_labelled(".session-actions", "Cancel turn")
        .await;
    // The cancelled turn's end starts the queued message as turn 2.
    browser
        .until(
            "the queued message's turn to end",
            "document.querySelector('.session-status')?.dataset.status === 'idle'
               && document.querySelectorAll('.line-turn').length === 2",
        )
        .await;
    let events = server
        .events(&session, None)
        .await
        .until(&["TURN_ENDED"])
        .await;
    let started: Vec<&Value> = (events.iter())
        .filter(|e| e["type"] == "TURN_STARTED")
        .map(|e| &e["payload"]["input"])
        .collect();
    assert_eq!(
        started,
        [&json!({"sleep_ms": 60_000}), &json!("and then this")]
    );
    browser.assert_no_errors("queueing a message").await;
}

/// Whether the page is scrolled to its end (within a few pixels).
const AT_END: &str =
    "window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 4";

/// Waits until the page has drawn two more frames (the console scrolls in
/// an animation frame after each event).
async fn frames_drawn(browser: &Browser) {
    browser
        .js("(window.settled = false, requestAnimationFrame(() =>
              requestAnimationFrame(() => { window.settled = true; })), true)")
        .await;
    browser.until("two frames drawn", "window.settled").await;
}

/// Waits until `session` is idle (its turn ended).
async fn idle(server: &Server, session: &str) {
    for _ in 0..600 {
        let (_, view) = server.get(&format!("/sessions/{session}")).await;
        if view["status"] == "idle" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("session {session} never became idle");
}

/// Sends `input` to `session` over the API once it is idle, and waits for its turn to end.
async fn turn_over_api(server: &Server, session: &str, input: &str) {
    idle(server, session).await;
    let (status, body) = server
        .post(
            &format!("/sessions/{session}/input"),
            json!({"input": input}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    idle(server, session).await;
}

#[tokio::test]
async fn on_a_phone_sessions_follow_their_end_decisions_are_clickable_and_deployments_appear() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    let hello = support::guest("hello");
    server.deploy("hello", &hello).await;
    server.deploy("ops", &support::guest("ops")).await;
    let browser = Browser::start().await;
    browser.resize(crate::support::browser::PHONE).await;
    browser.goto(&server.url("/")).await;
    sign_in(&browser, KEY).await;

    // A deployment made elsewhere appears without Refresh.
    browser.go("#/deployments").await;
    browser.find("section[data-app=hello]").await;
    server.deploy("late", &hello).await;
    browser
        .until(
            "the new app's deployment to appear",
            "document.querySelector(\"section[data-app=late] tr[data-version='1']\")?.dataset.status === 'active'",
        )
        .await;

    // A long session opens at its end and follows new output there.
    let session = server.session("hello", "/chat", json!("line 0")).await;
    for n in 1..12 {
        turn_over_api(&server, &session, &format!("line {n}")).await;
    }
    browser.go(&format!("#/sessions/{session}")).await;
    agent_says(&browser, "You said: line 11").await;
    status_is(&browser, "idle").await;
    assert_eq!(
        browser
            .js("document.documentElement.scrollHeight > 2 * window.innerHeight")
            .await,
        true,
        "the session is longer than the screen"
    );
    browser.until("the page to open at its end", AT_END).await;
    turn_over_api(&server, &session, "grows at the end").await;
    agent_says(&browser, "You said: grows at the end").await;
    status_is(&browser, "idle").await;
    browser.until("the page to follow to its end", AT_END).await;

    // Scrolled up to read, the page does not jump when output arrives.
    browser.js("window.scrollTo(0, 0)").await;
    frames_drawn(&browser).await;
    turn_over_api(&server, &session, "arrives while reading").await;
    agent_says(&browser, "You said: arrives while reading").await;
    status_is(&browser, "idle").await;
    frames_drawn(&browser).await;
    assert_eq!(
        browser.js("window.scrollY").await,
        json!(0),
        "the reader stays where they were"
    );
    // Sending from the box brings the answer into view.
    send(&browser, "sent from the box").await;
    agent_says(&browser, "You said: sent from the box").await;
    status_is(&browser, "idle").await;
    browser
        .until("the page to follow the reader's own turn", AT_END)
        .await;

    // The session list's status pill keeps its size on a phone.
    browser.go("#/sessions").await;
    browser.find("tr[data-session] .badge").await;
    assert_eq!(
        browser
            .js("(() => { const b = document.querySelector('tr[data-session] .badge');
                 return b.getBoundingClientRect().width < b.parentElement.getBoundingClientRect().width / 2; })()")
            .await,
        true,
        "the pill does not stretch across the card"
    );

    // On a phone, Deny is where the box is and takes a real click.
    let ops = server
        .session("ops", "/ops", json!("add apples pears"))
        .await;
    browser.go(&format!("#/sessions/{ops}")).await;
    agent_says(
        &browser,
        "Added apples. Added pears. Records: apples, pears.",
    )
    .await;
    send(&browser, "delete apples").await;
    status_is(&browser, "awaiting_approval").await;
    browser.click_labelled(".decision-dock", "Deny").await;
    agent_says(
        &browser,
        "The deletion of apples was denied by bootstrap. Records: apples, pears.",
    )
    .await;
    browser
        .until(
            "the box to come back",
            "document.querySelector('.composer').checkVisibility()
               && !document.querySelector('.decision-dock').checkVisibility()",
        )
        .await;
    // And Approve, the next time.
    send(&browser, "delete pears").await;
    status_is(&browser, "awaiting_approval").await;
    browser.click_labelled(".decision-dock", "Approve").await;
    agent_says(&browser, "Deleted pears. Records: apples.").await;
    browser
        .assert_no_errors("a phone's session and decisions")
        .await;
}

/// An operator sees which end user owns each session, in the list and on
/// the session's page, and narrows the list to one end user's sessions.
#[tokio::test]
async fn sessions_show_their_end_user_and_filter_by_one() {
    let dir = support::data_dir();
    let server = Server::start(dir.path()).await;
    server.deploy("hello", &support::guest("hello")).await;
    let mut sessions = Vec::new();
    for user in ["ada", "bob"] {
        let token = server.end_user_token("hello", user).await;
        let response = server
            .client
            .post(server.url("/sessions"))
            .bearer_auth(&token)
            .json(&json!({"app": "hello", "route": "/chat", "input": "hi"}))
            .send()
            .await
            .unwrap();
        let (status, created) = support::status_and_json(response).await;
        assert_eq!(status, 201, "{created}");
        sessions.push(created["session_id"].as_str().unwrap().to_string());
    }
    let operators = server.session("hello", "/chat", json!("hi")).await;
    let [adas, bobs] = [&sessions[0], &sessions[1]];

    let browser = Browser::start().await;
    browser.goto(&server.url("/")).await;
    sign_in(&browser, KEY).await;
    browser.go("#/sessions").await;
    browser
        .until(
            "three sessions listed",
            "document.querySelectorAll('tr[data-session]').length === 3",
        )
        .await;
    // The row's end-user cell, not the row's text: a row also shows the
    // session's random id, which can contain "ada" (it once did, `…6ada35c7`).
    let owner = |id: &str| {
        format!("document.querySelector(\"tr[data-session='{id}'] .end-user\")?.textContent")
    };
    browser
        .until(
            "each row names its own end user, the operator's none",
            &format!(
                "{} === 'ada' && {} === 'bob' && {} === undefined",
                owner(adas),
                owner(bobs),
                owner(&operators)
            ),
        )
        .await;

    let enter = char::from(fantoccini::key::Key::Enter);
    browser
        .fill("input[name=user-filter]", &format!("ada{enter}"))
        .await;
    browser
        .until(
            "only Ada's session listed",
            &format!(
                "document.querySelectorAll('tr[data-session]').length === 1 \
                 && !!document.querySelector(\"tr[data-session='{adas}']\")"
            ),
        )
        .await;

    browser.go(&format!("#/sessions/{adas}")).await;
    browser
        .until(
            "the session's facts name its end user",
            "document.querySelector('.end-user')?.textContent === 'ada'",
        )
        .await;
    // Her message is hers in the transcript, not an anonymous "User"'s.
    browser
        .until(
            "the input labelled with its end user",
            "document.querySelector('.msg-user .who')?.textContent === 'ada'",
        )
        .await;
    browser
        .assert_no_errors("filtering sessions by end user")
        .await;
}
