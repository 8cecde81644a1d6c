//! `ErrorCode`'s table checked: its codes unique and snake_case, each
//! status of its meaning's class, each code sent somewhere in `api/`, and
//! docs/api.md's error table listing exactly the table's codes and statuses.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use axum::http::StatusCode;

use super::ErrorCode;
use crate::end_users::EndUserAuthError;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn codes_are_unique_snake_case_strings() {
    let mut seen = BTreeSet::new();
    for code in ErrorCode::ALL {
        let wire = code.as_str();
        assert!(seen.insert(wire), "`{wire}` is in the table twice");
        let snake = wire
            .split('_')
            .all(|word| !word.is_empty() && word.bytes().all(|b| b.is_ascii_lowercase()));
        assert!(snake, "`{wire}` is not snake_case");
        assert!(!code.meaning().is_empty(), "`{wire}` has no meaning");
    }
}

#[test]
fn statuses_match_their_meaning_class() {
    for code in ErrorCode::ALL {
        let (wire, status) = (code.as_str(), code.status());
        let says = |class: &str| format!("`{wire}` is sent with {status}, not as a {class}");
        assert!(
            status.is_client_error() || status.is_server_error(),
            "{}",
            says("4xx or 5xx")
        );
        // Not found, and only that, is 404.
        assert_eq!(
            wire.ends_with("not_found"),
            status == StatusCode::NOT_FOUND,
            "{}",
            says("404 iff its name says not found")
        );
        // Too many, for now, is 429; a full journal is for good (409).
        if wire.starts_with("too_many_") || wire.ends_with("_limited") || wire == "queue_full" {
            assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{}", says("429"));
        }
        // A refused credential is 401, a refused permission 403.
        if status == StatusCode::UNAUTHORIZED {
            let meaning = code.meaning().to_lowercase();
            let credential = ["token", "key", "jwt", "jwks"]
                .iter()
                .any(|word| meaning.contains(word));
            assert!(credential, "{}", says("401 about a credential"));
        }
        // The server's side: its failures, its storage, its load, its
        // shutdown, an identity provider it cannot reach; never the client's.
        if status.is_server_error() {
            let servers = [
                "internal",
                "unavailable",
                "overloaded",
                "shutting_down",
                "jwks_unavailable",
            ];
            assert!(servers.contains(&wire), "{}", says("5xx"));
        }
        for also in code.also() {
            assert_ne!(*also, status, "`{wire}` lists its own status again");
            assert!(also.is_client_error(), "`{wire}`: another status is a 4xx");
        }
    }
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, into: &mut Vec<(PathBuf, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs")
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            into.push((path, text));
        }
    }
}

#[test]
fn every_code_is_sent_somewhere_in_the_api() {
    let mut files = Vec::new();
    sources(&repo().join("host/src/api"), &mut files);
    files.retain(|(path, _)| {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        !name.starts_with("error_code")
    });
    assert!(files.len() > 10, "host/src/api is not where it was");
    for code in ErrorCode::ALL {
        let name = format!("ErrorCode::{code:?}");
        let used = files.iter().any(|(_, text)| text.contains(&name));
        assert!(used, "`{name}` is in the table but nothing sends it");
    }
}

/// The `(status, code)` pairs of docs/api.md's table under "### Errors".
fn documented() -> BTreeSet<(u16, String)> {
    let path = repo().join("docs/api.md");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let section = text.split("\n### Errors\n").nth(1).unwrap_or_default();
    let mut pairs = BTreeSet::new();
    let mut in_table = false;
    for line in section.lines() {
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(status), Some(codes)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        // `400`, or `400 / 413`; the header and its rule have none.
        let statuses: Vec<u16> = (status.split('/'))
            .filter_map(|s| s.trim().parse().ok())
            .collect();
        for status in statuses {
            for code in codes.split('`').skip(1).step_by(2) {
                pairs.insert((status, code.to_string()));
            }
        }
    }
    pairs
}

#[test]
fn docs_api_md_lists_exactly_the_codes_and_their_statuses() {
    let documented = documented();
    assert!(
        documented.len() > 20,
        "docs/api.md has no error table under \"### Errors\""
    );
    let mut sent = BTreeSet::new();
    for code in ErrorCode::ALL {
        for status in std::iter::once(&code.status()).chain(code.also()) {
            sent.insert((status.as_u16(), code.as_str().to_string()));
        }
    }
    let missing: Vec<_> = sent.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&sent).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/api.md's error table and ErrorCode (host/src/api/error_code.rs) differ:\n\
         sent but not documented: {missing:?}\ndocumented but not sent: {extra:?}"
    );
}

#[test]
fn the_openapi_document_gives_code_as_the_enum_of_all_codes() {
    let document = serde_json::to_value(super::super::openapi_document()).unwrap_or_default();
    let schemas = &document["components"]["schemas"];
    assert_eq!(
        schemas["ErrorDetail"]["properties"]["code"]["$ref"],
        "#/components/schemas/ErrorCode"
    );
    let listed: Vec<&str> = (schemas["ErrorCode"]["enum"].as_array())
        .map(|values| values.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    let all: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(listed, all);
}

/// One refusal of each kind; a new kind fails to compile here until added.
fn every_end_user_refusal() -> Vec<EndUserAuthError> {
    use EndUserAuthError as E;
    let all = vec![
        E::MalformedToken(String::new()),
        E::UnsupportedAlgorithm(String::new()),
        E::UnknownKey {
            kid: String::new(),
            alg: "RS256",
        },
        E::MissingKeyId,
        E::InvalidSignature,
        E::TokenExpired,
        E::TokenNotYetValid,
        E::WrongIssuer,
        E::WrongAudience,
        E::TokenRevoked(String::new()),
        E::JwksUnavailable(String::new()),
        E::InvalidJwksUrl(String::new()),
    ];
    for err in &all {
        match err {
            E::MalformedToken(_)
            | E::UnsupportedAlgorithm(_)
            | E::UnknownKey { .. }
            | E::MissingKeyId
            | E::InvalidSignature
            | E::TokenExpired
            | E::TokenNotYetValid
            | E::WrongIssuer
            | E::WrongAudience
            | E::TokenRevoked(_)
            | E::JwksUnavailable(_)
            | E::InvalidJwksUrl(_) => {}
        }
    }
    all
}

#[test]
fn an_end_user_refusal_is_answered_with_the_code_its_own_tests_name() {
    for err in every_end_user_refusal() {
        let code = ErrorCode::from(&err);
        assert_eq!(code.as_str(), err.code(), "{err:?}");
        let status = code.status().as_u16();
        let expected = if matches!(err, EndUserAuthError::JwksUnavailable(_)) {
            503
        } else {
            401
        };
        assert_eq!(status, expected, "{err:?}");
    }
}
