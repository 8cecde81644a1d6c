//! Which tools need a human decision: the union of the agent's own flag (from
//! `describe` at build time), the manifest's `[tools.<name>] needs_approval`,
//! and the operator's `SERVICE_APPROVAL_POLICY`. Decided by the host from the
//! stored deployment, never from what the guest claims at run time.

use std::collections::HashMap;

use crate::store::DeploymentRecord;

/// The gating of one deployment's tools.
#[derive(Debug, Default)]
pub(super) struct Gates {
    by_tool: HashMap<String, Vec<&'static str>>,
    /// The policy as injected into the guest's environment (a JSON array).
    pub policy_json: String,
}

impl Gates {
    pub(super) fn from_record(record: &DeploymentRecord) -> Gates {
        let mut by_tool: HashMap<String, Vec<&'static str>> = HashMap::new();
        let code = (record.description.iter())
            .flat_map(|d| d.tools.iter())
            .filter(|t| t.needs_approval)
            .map(|t| (t.name.clone(), "code"));
        let manifest = (record.manifest_gated.iter()).map(|n| (n.clone(), "manifest"));
        let policy = (record.approval_policy.iter()).map(|n| (n.clone(), "policy"));
        for (name, mechanism) in code.chain(manifest).chain(policy) {
            let mechanisms = by_tool.entry(name).or_default();
            if !mechanisms.contains(&mechanism) {
                mechanisms.push(mechanism);
            }
        }
        let policy_json =
            serde_json::to_string(&record.approval_policy).unwrap_or_else(|_| "[]".into());
        Gates {
            by_tool,
            policy_json,
        }
    }

    /// The mechanisms that gate `tool` (`code`, `manifest`, `policy`); empty when ungated.
    pub(super) fn gated_by(&self, tool: &str) -> &[&'static str] {
        self.by_tool
            .get(tool)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{AgentDescription, DeploymentStatus, ToolInfo};

    #[test]
    fn the_three_mechanisms_combine_as_a_union() {
        let tool = |name: &str, needs_approval| ToolInfo {
            name: name.into(),
            description: String::new(),
            parameters: serde_json::json!({}),
            needs_approval,
        };
        let record = DeploymentRecord {
            id: uuid::Uuid::now_v7(),
            app_id: uuid::Uuid::now_v7(),
            version: 1,
            status: DeploymentStatus::Active,
            created_at: String::new(),
            finished_at: None,
            error: None,
            manifest: String::new(),
            entry: String::new(),
            description: Some(AgentDescription {
                routes: vec!["/a".into()],
                tools: vec![tool("rm", true), tool("ls", false), tool("mv", true)],
            }),
            artifact: None,
            manifest_gated: vec!["cp".into(), "mv".into()],
            approval_policy: vec!["launch".into(), "mv".into()],
            secrets: vec![],
            limits: Default::default(),
            outbound: vec![],
            end_users: None,
            end_user_approvals: Vec::new(),
            llm_budget: None,
        };
        let gates = Gates::from_record(&record);
        assert_eq!(gates.gated_by("rm"), ["code"]);
        assert_eq!(gates.gated_by("cp"), ["manifest"]);
        assert_eq!(
            gates.gated_by("launch"),
            ["policy"],
            "a policy gates unlisted tools"
        );
        assert_eq!(gates.gated_by("mv"), ["code", "manifest", "policy"]);
        assert!(gates.gated_by("ls").is_empty());
        assert_eq!(gates.policy_json, r#"["launch","mv"]"#);
    }
}
