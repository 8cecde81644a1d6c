//! Redaction of a turn's secret values from what its guest emits: message
//! text, tool arguments and outputs, the step's reason, error messages and
//! captured output. An exact value within one emitted string becomes
//! `[REDACTED:<NAME>]`; a value split across two deltas is not caught.
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
            other => other,
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
}
