//! What a decision may add to approve or deny (docs/approvals.md, "Richer
//! decisions"): edited `arguments` (checked against the tool's JSON Schema
//! from the session's deployment), a `message` for the agent, a `result`
//! given in place of the tool. Shared by `POST /sessions/{id}/approval` and
//! the AG-UI resume.

use serde_json::Value;
use uuid::Uuid;

use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::store::Missing;
use crate::store::{DecisionDetails, StoreError};

/// Longest `message` accepted, in bytes (docs/limits.md).
pub(super) const MAX_MESSAGE: usize = 4096;

/// Largest `arguments` or `result`, serialized: the one-JSON-payload limit a
/// turn's tool call or output has (docs/limits.md), so the resumed turn can
/// report what the human gave.
pub(super) const MAX_EDIT: usize = 256 << 10;

/// How many schema violations a 422 names.
const MAX_VIOLATIONS: usize = 5;

/// Checks the rules that need no store: `arguments` and `result` only with
/// an approval and not together; a `message` of 1 to `MAX_MESSAGE` bytes of
/// text (trimmed).
pub(super) fn details(
    approved: bool,
    arguments: Option<Value>,
    message: Option<String>,
    result: Option<Value>,
) -> Result<DecisionDetails, ApiError> {
    let invalid = |message: String| ApiError::new(ErrorCode::InvalidBody, message);
    if !approved && (arguments.is_some() || result.is_some()) {
        return Err(invalid(
            "`arguments` and `result` come only with `\"approved\": true`: a denied call runs nothing"
                .into(),
        ));
    }
    for (name, value) in [("arguments", &arguments), ("result", &result)] {
        let size = value.as_ref().map_or(0, |v| v.to_string().len());
        if size > MAX_EDIT {
            return Err(invalid(format!(
                "`{name}` is larger than {MAX_EDIT} bytes as JSON (the limit of a tool call's arguments or output)"
            )));
        }
    }
    if arguments.is_some() && result.is_some() {
        return Err(invalid(
            "give `arguments` (the tool runs with them) or `result` (the tool does not run), not both"
                .into(),
        ));
    }
    let message = match message.map(|m| m.trim().to_string()) {
        Some(m) if m.is_empty() || m.len() > MAX_MESSAGE => {
            return Err(invalid(format!(
                "`message` must be 1 to {MAX_MESSAGE} bytes of text"
            )));
        }
        message => message,
    };
    Ok(DecisionDetails {
        arguments,
        message,
        result,
        address_hash: None,
    })
}

/// When the decision edits the arguments: checks them against the JSON
/// Schema of the pending call's tool (`parameters` from the deployment's
/// `describe`), and returns the seq of the TOOL_APPROVAL_REQUIRED checked
/// (the writer refuses the decision if another call is pending by then).
/// 422 `invalid_arguments` names the violations; the decision is not made.
/// With nothing pending it checks nothing and returns `None`: the writer
/// answers (409, or the first answer again for a retried idempotency key).
/// A tool `describe` did not list (gated by the manifest or the policy
/// only) has no schema: any JSON is accepted.
pub(super) async fn check_arguments(
    state: &AppState,
    session: Uuid,
    details: &DecisionDetails,
) -> Result<Option<u64>, ApiError> {
    let Some(arguments) = details.arguments.clone() else {
        return Ok(None);
    };
    let found = state
        .store
        .read(move |s| {
            let Some(record) = s.session(session)? else {
                return Err(StoreError::not_found(Missing::Session, session));
            };
            let Some(pending) = record.pending_approval else {
                return Ok(None);
            };
            let deployment = s.deployment(record.deployment_id)?;
            let schema = (deployment.and_then(|d| d.description))
                .and_then(|d| d.tools.into_iter().find(|t| t.name == pending.call.name))
                .map(|tool| tool.parameters);
            Ok(Some((pending.event_seq, pending.call.name, schema)))
        })
        .await?;
    let Some((seq, tool, schema)) = found else {
        return Ok(None);
    };
    let Some(schema) = schema else {
        return Ok(Some(seq));
    };
    let violations = tokio::task::spawn_blocking(move || violations(&schema, &arguments))
        .await
        .map_err(ApiError::internal)?;
    match violations {
        Ok(()) => Ok(Some(seq)),
        Err(found) => Err(ApiError::new(
            ErrorCode::InvalidArguments,
            format!(
                "the edited arguments do not match the JSON Schema of `{tool}`: {found}; nothing was decided"
            ),
        )),
    }
}

/// The first violations of `schema` by `instance`, as one line; a schema
/// that cannot be compiled is one too (its edits cannot be checked).
fn violations(schema: &Value, instance: &Value) -> Result<(), String> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| format!("its schema cannot be compiled ({e}), so no edit can be checked"))?;
    let found: Vec<String> = validator
        .iter_errors(instance)
        .take(MAX_VIOLATIONS)
        .map(|e| {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_string() } else { at };
            format!("at `{at}`: {e}")
        })
        .collect();
    if found.is_empty() {
        Ok(())
    } else {
        Err(found.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn edits_come_only_with_an_approval_and_not_together() {
        let args = Some(json!({"a": 1}));
        assert!(details(false, args.clone(), None, None).is_err());
        assert!(details(false, None, None, Some(json!(1))).is_err());
        assert!(details(true, args.clone(), None, Some(json!(1))).is_err());
        let ok = details(true, args.clone(), Some("  why  ".into()), None).unwrap();
        assert_eq!(ok.message.as_deref(), Some("why"));
        assert!(details(false, None, Some("no".into()), None).is_ok());
    }

    #[test]
    fn edits_are_bounded_as_a_tool_payload_is() {
        // `"` + n bytes + `"`: exactly at the bound, then one byte over.
        let at = json!("x".repeat(MAX_EDIT - 2));
        assert!(details(true, None, None, Some(at.clone())).is_ok());
        assert!(details(true, Some(at), None, None).is_ok());
        let over = json!("x".repeat(MAX_EDIT - 1));
        assert!(details(true, None, None, Some(over.clone())).is_err());
        assert!(details(true, Some(over), None, None).is_err());
    }

    #[test]
    fn the_message_is_bounded() {
        let at_limit = "x".repeat(MAX_MESSAGE);
        assert!(details(false, None, Some(at_limit.clone()), None).is_ok());
        assert!(details(false, None, Some(at_limit + "x"), None).is_err());
        assert!(details(false, None, Some("   ".into()), None).is_err());
    }

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {"amount": {"type": "integer", "maximum": 100}},
            "required": ["amount"],
            "additionalProperties": false
        });
        assert_eq!(violations(&schema, &json!({"amount": 40})), Ok(()));
        let bad = violations(&schema, &json!({"amount": 400, "x": 1})).unwrap_err();
        assert!(bad.contains("/amount"), "{bad}");
        assert!(violations(&schema, &json!({})).is_err());
        assert!(violations(&json!({"type": 12}), &json!({})).is_err());
    }
}
