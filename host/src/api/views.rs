//! The JSON shapes of sessions, apps and deployments (documented in docs/api.md).

use serde_json::{Value, json};

use crate::runtime::outbound::OutboundPolicy;
use crate::store::{AppRecord, DeploymentRecord, SessionRecord};

pub fn session(s: &SessionRecord) -> Value {
    json!({
        "session_id": s.id,
        "app_id": s.app_id,
        "app": s.app_slug,
        "route": s.route,
        "deployment_id": s.deployment_id,
        "deployment_version": s.deployment_version,
        "status": s.status.as_str(),
        "turn": s.turn,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "pending_approval": s.pending_approval.as_ref().map(|p| json!({
            "tool_call_id": p.call.tool_call_id,
            "name": p.call.name,
            "arguments": p.call.arguments,
            "gated_by": p.gated_by,
        })),
    })
}

pub fn deployment(d: &DeploymentRecord, app: &AppRecord, policy: &OutboundPolicy) -> Value {
    let effective: Vec<String> = (policy.effective(&d.outbound).iter())
        .map(|o| o.to_string())
        .collect();
    let mut row = json!({
        "id": d.id,
        "app_id": d.app_id,
        "app": app.slug,
        "version": d.version,
        "status": d.status,
        "active": app.current_deployment == Some(d.id),
        "created_at": d.created_at,
        "finished_at": d.finished_at,
        "entry": d.entry,
        "manifest_gated_tools": d.manifest_gated,
        "approval_policy": d.approval_policy,
        "secrets": d.secrets,
        "limits": d.limits,
        "outbound": {"declared": d.outbound, "effective": effective},
    });
    if let Some(error) = &d.error {
        row["error"] = json!(error);
    }
    if let Some(description) = &d.description {
        row["routes"] = json!(description.routes);
        row["tools"] = json!(description.tools);
    }
    row
}

pub fn app(a: &AppRecord, current: Option<&DeploymentRecord>) -> Value {
    let description = current.and_then(|d| d.description.as_ref());
    json!({
        "id": a.id,
        "slug": a.slug,
        "created_at": a.created_at,
        "current_deployment": current.map(|d| json!({"id": d.id, "version": d.version})),
        "routes": description.map(|d| d.routes.clone()).unwrap_or_default(),
        "tools": description.map(|d| d.tools.clone()).unwrap_or_default(),
    })
}
