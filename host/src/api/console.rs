//! The web console's static files: embedded in the binary (`console/`),
//! served at `/` and `/console/*` with a strict Content-Security-Policy. They
//! carry no data: every data call the console makes uses the signed-in key.

use std::sync::LazyLock;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// One embedded file and the path it is served at.
pub(super) struct Asset {
    pub path: &'static str,
    pub content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $file:literal, $content_type:expr) => {
        Asset {
            path: $path,
            content_type: $content_type,
            body: include_bytes!(concat!("console/", $file)),
        }
    };
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";
const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the console. Each becomes a `Public` row of the endpoint table.
pub(super) static ASSETS: &[Asset] = &[
    asset!("/", "index.html", HTML),
    asset!("/console/console.css", "console.css", CSS),
    asset!("/console/icon.svg", "icon.svg", SVG),
    asset!("/console/app.js", "app.js", JS),
    asset!("/console/api.js", "api.js", JS),
    asset!("/console/dom.js", "dom.js", JS),
    asset!("/console/signin.js", "signin.js", JS),
    asset!("/console/deployments.js", "deployments.js", JS),
    asset!("/console/sessions.js", "sessions.js", JS),
    asset!("/console/session.js", "session.js", JS),
    asset!("/console/transcript.js", "transcript.js", JS),
    asset!("/console/stream.js", "stream.js", JS),
    asset!("/console/decision.js", "decision.js", JS),
    asset!("/console/approvals.js", "approvals.js", JS),
    asset!("/console/feed.js", "feed.js", JS),
    asset!("/console/keys.js", "keys.js", JS),
    asset!("/console/secrets.js", "secrets.js", JS),
];

/// Only the console's own files, no inline script or style, no framing, no
/// form posts; Trusted Types make any HTML string sink (`innerHTML`) throw.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; \
require-trusted-types-for 'script'; trusted-types 'none'";

/// A strong ETag per asset (its content's SHA-256), computed once.
static ETAGS: LazyLock<Vec<HeaderValue>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|asset| {
            let digest = Sha256::digest(asset.body);
            let tag = format!("\"{}\"", hex::encode(&digest[..16]));
            HeaderValue::from_str(&tag).unwrap_or(HeaderValue::from_static("\"console\""))
        })
        .collect()
});

/// Serves `ASSETS[index]`. The names carry no content hash, so browsers
/// revalidate every time (`no-cache`) and get `304` while the ETag matches.
pub(super) fn serve(index: usize, request: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.get(index) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let etag = ETAGS[index].clone();
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::ETAG, etag.clone());
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    let unchanged = request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|tag| tag.trim() == etag.to_str().unwrap_or_default() || tag.trim() == "*");
    if unchanged {
        return (StatusCode::NOT_MODIFIED, headers).into_response();
    }
    (headers, asset.body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_has_a_distinct_path_and_a_body() {
        let mut paths: Vec<&str> = ASSETS.iter().map(|a| a.path).collect();
        paths.sort_unstable();
        paths.dedup();
        assert_eq!(paths.len(), ASSETS.len());
        assert!(ASSETS.iter().all(|a| !a.body.is_empty()));
        assert!(
            ASSETS
                .iter()
                .all(|a| a.content_type == HTML || a.path != "/")
        );
    }

    #[test]
    fn every_module_the_page_imports_is_embedded() {
        // A module imported but not embedded would 404 in the browser.
        for asset in ASSETS.iter().filter(|a| a.content_type == JS) {
            let text = std::str::from_utf8(asset.body).unwrap();
            for line in text.lines().filter(|l| l.starts_with("import ")) {
                let target = line
                    .rsplit_once("from '")
                    .and_then(|(_, rest)| rest.split_once('\''))
                    .map(|(name, _)| name.trim_start_matches("./"))
                    .unwrap_or_else(|| panic!("unreadable import in {}: {line}", asset.path));
                let path = format!("/console/{target}");
                assert!(
                    ASSETS.iter().any(|a| a.path == path),
                    "{} imports {path}, which is not embedded",
                    asset.path
                );
            }
        }
    }
}
