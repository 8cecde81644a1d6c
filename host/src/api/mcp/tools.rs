//! Each route of each app is an MCP tool: its name (`tool_name`), its
//! description and input schema, and the tools a caller may see.
//!
//! A tool's name is the app's slug, `_`, then the route without its
//! leading `/`, each `/` and `.` as `_` (`ops` and `/v1/chat`:
//! `ops_v1_chat`; the route `/` alone: `ops`). Slugs hold no `_`, so the
//! slug is what comes before the first `_`. Names use only `A-Z a-z 0-9 _ -`
//! (MCP's tool-name rule, and the function-name rule of the model APIs
//! that MCP hosts pass tools to). A route whose name is taken by an
//! earlier route of the app, or that would pass 128 characters, is not a
//! tool (docs/mcp.md).

use serde_json::{Value, json};
use uuid::Uuid;

use crate::api::{ApiError, AppState};
use crate::build::manifest::Manifest;
use crate::keys::{Principal, Scope};
use crate::store::DeploymentRecord;

/// MCP's longest tool name.
pub(super) const MAX_NAME: usize = 128;

/// One tool: an app's route.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Tool {
    pub name: String,
    pub app_id: Uuid,
    pub slug: String,
    pub route: String,
    /// `[routes."<route>"]` of the manifest: what the tool says of itself.
    pub description: Option<String>,
    /// ... and the arguments it takes (then the turn's input is the
    /// arguments, without `session_id`).
    pub input_schema: Option<Value>,
}

impl Tool {
    /// The tool as `tools/list` shows it.
    pub(super) fn listed(&self) -> Value {
        let description = self.description.clone().unwrap_or_else(|| {
            format!(
                "Runs a turn of the agenthost agent `{}` on its route `{}`: `message` is the turn's input. Continues an earlier conversation when `session_id` names its session (every result names it). Returns the agent's final message.",
                self.slug, self.route
            )
        });
        let schema = match &self.input_schema {
            Some(schema) => with_session_id(schema.clone()),
            None => input_schema(),
        };
        json!({
            "name": self.name,
            "title": format!("{} {}", self.slug, self.route),
            "description": description,
            "inputSchema": schema,
        })
    }
}

/// A manifest's input schema with the `session_id` every tool takes.
fn with_session_id(mut schema: Value) -> Value {
    if let Some(properties) = schema.as_object_mut().map(|s| {
        s.entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    }) && let Some(properties) = properties
    {
        properties.entry("session_id").or_insert_with(|| {
            json!({"type": "string", "description": "Continue this session (the `session_id` of an earlier result) instead of starting a new one"})
        });
    }
    schema
}

/// The input schema of every tool: a message, and optionally the session
/// to continue.
pub(super) fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "description": "The turn's input: the user's message to the agent"
            },
            "session_id": {
                "type": "string",
                "description": "Continue this session (the `session_id` of an earlier result) instead of starting a new one"
            }
        },
        "required": ["message"],
        "additionalProperties": false
    })
}

/// The name of `route`'s tool in the app `slug`.
pub(super) fn tool_name(slug: &str, route: &str) -> String {
    let rest: String = (route.trim_start_matches('/').chars())
        .map(|c| if c == '/' || c == '.' { '_' } else { c })
        .collect();
    if rest.is_empty() {
        slug.to_string()
    } else {
        format!("{slug}_{rest}")
    }
}

/// The tools of one app's current deployment, in its routes' order.
fn app_tools(app_id: Uuid, slug: &str, current: Option<&DeploymentRecord>) -> Vec<Tool> {
    let routes = (current.and_then(|d| d.description.as_ref())).map(|d| d.routes.as_slice());
    // The stored manifest passed this parse at upload.
    let mut settings = (current.and_then(|d| Manifest::parse(&d.manifest).ok()))
        .map(|m| m.routes)
        .unwrap_or_default();
    let mut tools: Vec<Tool> = Vec::new();
    for route in routes.unwrap_or_default() {
        let name = tool_name(slug, route);
        if name.len() > MAX_NAME || tools.iter().any(|t| t.name == name) {
            continue;
        }
        let own = settings.remove(route).unwrap_or_default();
        tools.push(Tool {
            name,
            app_id,
            slug: slug.to_string(),
            route: route.clone(),
            description: own.description,
            input_schema: own.input_schema,
        });
    }
    tools
}

/// Every tool `principal` may call: a platform key's are every app's, an
/// invocation key's or end user's their app's; sorted by name.
pub(super) async fn visible(
    state: &AppState,
    principal: &Principal,
) -> Result<Vec<Tool>, ApiError> {
    let scope = principal.scope;
    let mut tools = state
        .store
        .read(move |s| {
            let apps = match scope {
                Scope::Platform => s.apps()?,
                Scope::App(own) => s.app(&own.to_string())?.into_iter().collect(),
                // A stream token names one session's events, no tools.
                Scope::Session(_) => Vec::new(),
            };
            let mut tools = Vec::new();
            for app in apps {
                let current = match app.current_deployment {
                    Some(id) => s.deployment(id)?,
                    None => None,
                };
                tools.extend(app_tools(app.id, &app.slug, current.as_ref()));
            }
            Ok(tools)
        })
        .await?;
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tools)
}

/// The tool named `name`, if `principal` may call it.
pub(super) async fn find(
    state: &AppState,
    principal: &Principal,
    name: &str,
) -> Result<Option<Tool>, ApiError> {
    let slug = name.split('_').next().unwrap_or_default().to_string();
    let found = state
        .store
        .read(move |s| {
            let Some(app) = s.app(&slug)? else {
                return Ok(None);
            };
            let current = match app.current_deployment {
                Some(id) => s.deployment(id)?,
                None => None,
            };
            Ok(Some(app_tools(app.id, &app.slug, current.as_ref())))
        })
        .await?;
    let tools = found.unwrap_or_default();
    Ok(tools
        .into_iter()
        .find(|tool| tool.name == name && principal.may_use_app(tool.app_id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_mcps_rule_and_name_the_slug_first() {
        assert_eq!(tool_name("ops", "/ops"), "ops_ops");
        assert_eq!(tool_name("ops", "/v1/chat.json"), "ops_v1_chat_json");
        assert_eq!(tool_name("hello-world", "/"), "hello-world");
        let name = tool_name("a-b", "/x-y/z_w");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        );
        assert_eq!(name.split('_').next(), Some("a-b"));
    }

    #[test]
    fn a_taken_or_too_long_name_is_no_tool() {
        let deployment: DeploymentRecord = serde_json::from_value(json!({
            "id": Uuid::nil(), "app_id": Uuid::nil(), "version": 1, "status": "active",
            "created_at": "", "manifest": "", "entry": "",
            "description": {"routes": ["/a/b", "/a.b", &format!("/{}", "x".repeat(127)), "/c"], "tools": []}
        }))
        .unwrap();
        let tools = app_tools(Uuid::nil(), "app", Some(&deployment));
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["app_a_b", "app_c"]);
        assert_eq!(tools[0].route, "/a/b");
    }
}
