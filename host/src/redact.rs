//! Redaction of a turn's secret values from what its guest emits: message
//! text, tool arguments and outputs, the step's reason, error messages and
//! captured output. An exact value within one emitted string becomes
//! `[REDACTED:<NAME>]`; a value split across two deltas is not caught. A
//! JSON number whose digits hold a value becomes that string; an outbound
//! request's path is redacted percent-decoded too (`redact_path`).
//! Values shorter than `MIN_REDACTED` bytes are left alone (they would
//! mangle ordinary text).

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

pub(crate) const MIN_REDACTED: usize = 4;

#[derive(Default, Clone)]
pub(crate) struct Redactor {
    secrets: Vec<(String, Arc<str>)>,
}

impl Redactor {
    pub(crate) fn new(secrets: Vec<(String, Arc<str>)>) -> Self {
        let mut secrets: Vec<_> = secrets
            .into_iter()
            .filter(|(_, value)| value.len() >= MIN_REDACTED)
            .collect();
        // Longest first, so a value containing another is redacted whole.
        secrets.sort_by_key(|(_, value)| std::cmp::Reverse(value.len()));
        Redactor { secrets }
    }

    pub(crate) fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for (name, value) in &self.secrets {
            if out.contains(&**value) {
                out = Cow::Owned(out.replace(&**value, &format!("[REDACTED:{name}]")));
            }
        }
        out
    }

    /// Redacts every string (keys included) of a JSON value.
    pub(crate) fn redact_value(&self, value: Value) -> Value {
        if self.secrets.is_empty() {
            return value;
        }
        match value {
            Value::String(s) => Value::String(self.redact(&s).into_owned()),
            Value::Array(items) => {
                Value::Array(items.into_iter().map(|v| self.redact_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(k, v)| (self.redact(&k).into_owned(), self.redact_value(v)))
                    .collect(),
            ),
            // A numeric PIN or account number: its digits, as text.
            Value::Number(n) => {
                let digits = n.to_string();
                match self.redact(&digits) {
                    Cow::Owned(redacted) => Value::String(redacted),
                    Cow::Borrowed(_) => Value::Number(n),
                }
            }
            other => other,
        }
    }

    /// Redacts a URL path as sent (percent-encoded): a value the client
    /// percent-encoded (wholly or in part) is caught in the decoded path,
    /// which is then what is shown, redacted.
    pub(crate) fn redact_path<'a>(&self, raw: &'a str) -> Cow<'a, str> {
        let redacted = self.redact(raw);
        if self.secrets.is_empty() || !raw.contains('%') {
            return redacted;
        }
        let decoded = percent_encoding::percent_decode_str(&redacted).decode_utf8_lossy();
        match self.redact(&decoded) {
            Cow::Owned(hidden) => Cow::Owned(hidden),
            Cow::Borrowed(_) => redacted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn exact_values_are_replaced_everywhere() {
        let r = Redactor::new(vec![
            ("TOKEN".into(), Arc::from("sk-12345")),
            ("PIN".into(), Arc::from("42")),
        ]);
        assert_eq!(
            r.redact("key sk-12345 and 42"),
            "key [REDACTED:TOKEN] and 42"
        );
        assert_eq!(
            r.redact_value(json!({"a": ["x sk-12345"], "sk-12345": 1})),
            json!({"a": ["x [REDACTED:TOKEN]"], "[REDACTED:TOKEN]": 1})
        );
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
    }

    /// Each case: what the guest emitted, what may be journaled.
    #[test]
    fn numbers_and_percent_encoded_paths_are_redacted() {
        let r = Redactor::new(vec![
            ("PIN".into(), Arc::from("482913")),
            ("KEY".into(), Arc::from("s3cr3t/k+y=")),
            ("TOKEN".into(), Arc::from("tok-abc")),
        ]);
        let values = [
            (json!(482913), json!("[REDACTED:PIN]")),
            (json!({"pin": 482913}), json!({"pin": "[REDACTED:PIN]"})),
            (json!([1482913]), json!(["1[REDACTED:PIN]"])),
            (json!(4829.13), json!(4829.13)),
            (json!(12), json!(12)),
            (json!("pin 482913"), json!("pin [REDACTED:PIN]")),
        ];
        for (emitted, journaled) in values {
            assert_eq!(r.redact_value(emitted.clone()), journaled, "{emitted}");
        }
        let paths = [
            ("/v1/s3cr3t/k+y=/x", "/v1/[REDACTED:KEY]/x"),
            ("/v1/s3cr3t%2Fk%2By%3D/x", "/v1/[REDACTED:KEY]/x"),
            ("/v1/s3cr3t%2fk%2by%3d/x", "/v1/[REDACTED:KEY]/x"),
            ("/%74%6F%6B%2D%61%62%63", "/[REDACTED:TOKEN]"),
            ("/tok-abc/%74ok-abc", "/[REDACTED:TOKEN]/[REDACTED:TOKEN]"),
            ("/plain%20path", "/plain%20path"),
            ("/nothing", "/nothing"),
        ];
        for (sent, journaled) in paths {
            assert_eq!(r.redact_path(sent), journaled, "{sent}");
        }
    }
}
