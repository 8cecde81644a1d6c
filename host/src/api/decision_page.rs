//! The pages a decision link shows in a browser: one small, styled page
//! per state (pending, just decided, decided before, session ended,
//! expired, revoked, not a link), readable at 390 px, with no script and
//! nothing loaded (the links' CSP allows inline style only). Only the text
//! is built here; `decision_links` decides which page, and with which
//! status, a request gets.

use std::fmt::Write as _;

/// The call a pending link names, as its page shows it.
pub(super) struct Pending<'a> {
    pub approve: bool,
    pub tool: &'a str,
    /// The agent's explanation of the step, if it gave one.
    pub reason: Option<&'a str>,
    /// The end user whose session it is, if an end user opened it.
    pub end_user: Option<&'a str>,
    pub app: &'a str,
    pub session: String,
    /// The call's arguments, pretty-printed JSON.
    pub arguments: String,
    /// When this link stops deciding (RFC 3339).
    pub link_until: String,
    /// When the call is denied unless decided (RFC 3339), if ever.
    pub deadline: Option<&'a str>,
    /// The link's signed token, posted back by the form.
    pub token: &'a str,
}

/// A decision as a page shows it: what, by whom, when.
pub(super) struct Decided {
    pub approved: bool,
    pub tool: String,
    /// Who decided, as the journal credits it (`webhook:<id>` for a link).
    pub approver: String,
    /// When (the decision event's time, RFC 3339).
    pub at: String,
}

/// Why a link decides nothing (each its own page and status).
pub(super) enum Closed {
    /// No such link (bad signature, unknown or deleted endpoint).
    Invalid,
    /// Its endpoint's secret was rotated after it was sent.
    Revoked,
    /// Its own lifetime (`--decision-link-ttl`) passed.
    LinkExpired,
    /// The approval's deadline passed.
    DeadlinePassed,
    /// Decided before (by anyone, through any way).
    Decided(Decided),
    /// The call is not pending and no decision of it was found: its
    /// session ended or went on.
    Gone,
}

const STYLE: &str = "\
:root{color-scheme:light dark;--bg:#f5f6f8;--panel:#fff;--text:#1b1f24;--muted:#5b6470;\
--line:#d9dde3;--code:#f0f2f5;--ok:#1a7f37;--bad:#c62828;--warn:#9a6700;--focus:#f0a500;\
font:16px/1.5 system-ui,-apple-system,\"Segoe UI\",Roboto,\"Noto Sans\",sans-serif}\
@media (prefers-color-scheme:dark){:root{--bg:#15181d;--panel:#1e2228;--text:#e6e9ee;\
--muted:#9aa4b1;--line:#343a43;--code:#262b33;--ok:#4ac26b;--bad:#f47067;--warn:#d4a72c}}\
*{box-sizing:border-box}\
body{margin:0;background:var(--bg);color:var(--text);padding:16px}\
main{max-width:36rem;margin:0 auto;background:var(--panel);border:1px solid var(--line);\
border-radius:8px;padding:20px}\
h1{font-size:1.35rem;line-height:1.3;margin:0 0 12px}\
p{margin:0 0 12px}\
.muted{color:var(--muted);font-size:.9rem}\
code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em;\
background:var(--code);border-radius:4px;padding:0 4px;overflow-wrap:anywhere}\
pre{background:var(--code);border-radius:6px;padding:12px;margin:0 0 16px;font-size:.85rem;\
white-space:pre-wrap;overflow-wrap:anywhere;max-height:50vh;overflow:auto}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 12px;margin:0 0 16px}\
dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}\
blockquote{margin:0 0 16px;padding:8px 12px;border-left:4px solid var(--line)}\
label{display:block;font-weight:600;margin:0 0 4px}\
textarea{width:100%;min-height:5rem;font:inherit;padding:8px;border:1px solid var(--line);\
border-radius:6px;background:var(--bg);color:var(--text);margin:0 0 16px}\
button{width:100%;font:inherit;font-weight:600;padding:14px;border:0;border-radius:8px;\
color:#fff;cursor:pointer}\
button.approve{background:var(--ok)}button.deny{background:var(--bad)}\
button:focus-visible,textarea:focus-visible{outline:3px solid var(--focus);outline-offset:2px}\
.badge{display:inline-block;font-weight:600;border-radius:999px;padding:2px 10px;margin:0 0 12px}\
.ok{color:var(--ok);border:1px solid var(--ok)}.bad{color:var(--bad);border:1px solid var(--bad)}\
.warn{color:var(--warn);border:1px solid var(--warn)}";

/// Text for HTML (text and attribute values).
pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// An RFC 3339 time as people read it: `2026-12-02 07:12 UTC` (the page
/// runs no script, so it cannot show the reader's own time zone).
fn when(rfc3339: &str) -> String {
    match (rfc3339.get(..10), rfc3339.get(11..16)) {
        (Some(day), Some(time)) if rfc3339.ends_with('Z') => format!("{day} {time} UTC"),
        _ => rfc3339.to_string(),
    }
}

/// Who decided, in words: a link's endpoint, the deadline, or the name.
fn who(approver: &str) -> String {
    if approver.starts_with("webhook:") {
        "a decision link".into()
    } else if approver == "timeout" {
        "its deadline (nobody decided in time)".into()
    } else {
        approver.to_string()
    }
}

fn document(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"robots\" content=\"noindex\">\
         <title>{title}</title><style>{STYLE}</style></head>\
         <body><main>{body}</main></body></html>",
        title = escape(title),
    )
}

/// The confirmation page of a pending call (decides nothing).
pub(super) fn pending(p: &Pending<'_>) -> String {
    let (verb, class) = if p.approve {
        ("Approve", "approve")
    } else {
        ("Deny", "deny")
    };
    let tool = escape(p.tool);
    let mut body = format!("<h1>{verb} the call of <code>{tool}</code>?</h1>");
    if let Some(reason) = p.reason.filter(|r| !r.trim().is_empty()) {
        let _ = write!(
            body,
            "<p class=\"muted\">The agent says why:</p><blockquote>{}</blockquote>",
            escape(reason)
        );
    }
    let requester = match p.end_user {
        Some(user) => format!("end user <code>{}</code>", escape(user)),
        None => "an API key (no end user)".into(),
    };
    let _ = write!(
        body,
        "<dl><dt>Requested by</dt><dd>{requester}</dd>\
         <dt>App</dt><dd><code>{app}</code></dd>\
         <dt>Session</dt><dd><code>{session}</code></dd>\
         <dt>Link valid until</dt><dd>{until}</dd>",
        app = escape(p.app),
        session = escape(&p.session),
        until = escape(&when(&p.link_until)),
    );
    if let Some(deadline) = p.deadline {
        let _ = write!(
            body,
            "<dt>Denied unless decided by</dt><dd>{}</dd>",
            escape(&when(deadline))
        );
    }
    let _ = write!(
        body,
        "</dl><p class=\"muted\">Arguments</p><pre>{}</pre>\
         <form method=\"post\" action=\"?t={token}\">",
        escape(&p.arguments),
        token = escape(p.token),
    );
    if !p.approve {
        body.push_str(
            "<label for=\"message\">Message to the agent (optional)</label>\
             <textarea id=\"message\" name=\"message\" maxlength=\"4096\" \
             placeholder=\"Why it was denied, or what to do instead\"></textarea>",
        );
    }
    let _ = write!(
        body,
        "<button class=\"{class}\" type=\"submit\">{verb}</button></form>"
    );
    document(&format!("{verb} the call of {}?", p.tool), &body)
}

/// The page after this link decided.
pub(super) fn done(approved: bool, tool: &str, at: &str) -> String {
    let (word, class, next) = if approved {
        ("Approved", "ok", "The agent goes on with the call.")
    } else {
        ("Denied", "bad", "The agent is told the call was denied.")
    };
    let body = format!(
        "<span class=\"badge {class}\">{word}</span>\
         <h1>The call of <code>{tool}</code> was {lower}.</h1>\
         <p>{next}</p><p class=\"muted\">Decided through this link at {at}.</p>",
        tool = escape(tool),
        lower = word.to_lowercase(),
        at = escape(&when(at)),
    );
    document(&format!("{word}: {tool}"), &body)
}

/// The page of a link that decides nothing.
pub(super) fn closed(state: &Closed) -> String {
    let (title, badge, heading, text) = match state {
        Closed::Invalid => (
            "Not a decision link".to_string(),
            ("warn", "Invalid"),
            "This link is not valid.".to_string(),
            "It may be mistyped, or its webhook endpoint was deleted or turned off. \
             Decide the call in the console."
                .to_string(),
        ),
        Closed::Revoked => (
            "Link revoked".into(),
            ("warn", "Revoked"),
            "This link was revoked.".into(),
            "Its webhook endpoint's secret was rotated after it was sent. \
             Decide the call in the console."
                .into(),
        ),
        Closed::LinkExpired => (
            "Link expired".into(),
            ("warn", "Expired"),
            "This link has expired.".into(),
            "Decision links work for a limited time (--decision-link-ttl). \
             Decide the call in the console."
                .into(),
        ),
        Closed::DeadlinePassed => (
            "Approval expired".into(),
            ("warn", "Expired"),
            "The approval's deadline has passed.".into(),
            "Nobody decided in time, so the call is denied.".into(),
        ),
        Closed::Decided(d) => {
            let (word, class) = if d.approved {
                ("Approved", "ok")
            } else {
                ("Denied", "bad")
            };
            (
                format!("Already {}: {}", word.to_lowercase(), d.tool),
                (class, word),
                format!(
                    "The call of <code>{}</code> was already {}.",
                    escape(&d.tool),
                    word.to_lowercase()
                ),
                format!(
                    "Decided by {} at {}. This link decides nothing more.",
                    escape(&who(&d.approver)),
                    escape(&when(&d.at))
                ),
            )
        }
        Closed::Gone => (
            "No longer pending".into(),
            ("warn", "Closed"),
            "This call is no longer waiting for a decision.".into(),
            "Its session ended, or the call was settled another way.".into(),
        ),
    };
    let body = format!(
        "<span class=\"badge {}\">{}</span><h1>{heading}</h1><p>{text}</p>",
        badge.0, badge.1
    );
    document(&title, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_page_escapes_what_the_agent_and_the_client_wrote() {
        let page = pending(&Pending {
            approve: false,
            tool: "delete<script>",
            reason: Some("because </blockquote><script>alert(1)</script>"),
            end_user: Some("u\"1"),
            app: "ops",
            session: "s".into(),
            arguments: "{\"a\": \"<b>\"}".into(),
            link_until: "2026-12-02T07:12:00.000Z".into(),
            deadline: None,
            token: "x\"y",
        });
        assert!(!page.contains("<script>"), "{page}");
        assert!(page.contains("delete&lt;script&gt;"));
        assert!(page.contains("u&quot;1"));
        assert!(page.contains("2026-12-02 07:12 UTC"));
        assert!(page.contains("name=\"message\""), "deny offers a message");
        assert!(!page.contains('`'), "no backticks: {page}");
    }

    #[test]
    fn times_read_as_utc_and_odd_ones_pass_through() {
        assert_eq!(when("2026-12-02T07:12:33.123Z"), "2026-12-02 07:12 UTC");
        assert_eq!(when("soon"), "soon");
        assert_eq!(who("webhook:01"), "a decision link");
    }
}
