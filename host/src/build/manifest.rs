//! The deployment manifest (`agenthost.toml`): one serde struct, unknown keys refused.
//!
//! The uploaded manifest is authoritative for platform settings; the
//! component's `describe` is authoritative for routes and tools.
//! Documented in docs/manifest.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::runtime::limits::{
    APPROVAL_TIMEOUT_MAX_SECS, BOUNDS, CPU_FUEL, MAX_EVENTS, MAX_OPEN_MESSAGES, MAX_OUTPUT_MB,
    MEMORY_MB, WALL_CLOCK_SECS,
};
use crate::runtime::valid_tool_name;
use crate::store::LimitsRecord;

/// Largest manifest accepted, in bytes.
pub(crate) const MAX_MANIFEST_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Manifest {
    pub app: AppSection,
    pub agent: AgentSection,
    /// Per-tool platform settings, keyed by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolSettings>,
    /// Per-turn limits (within the server's maxima; see docs/limits.md).
    #[serde(default)]
    pub limits: LimitsSection,
    /// Outbound HTTP (see docs/outbound.md).
    #[serde(default)]
    pub outbound: OutboundSection,
    /// End users as principals (see docs/end-users.md).
    #[serde(default)]
    pub end_users: Option<EndUsersSection>,
    /// What MCP clients are told of each route's tool (docs/mcp.md).
    #[serde(default)]
    pub routes: BTreeMap<String, RouteSettings>,
    /// MCP servers the host calls for the agent (docs/mcp.md).
    #[serde(default)]
    pub mcp: BTreeMap<String, crate::runtime::mcp::settings::McpServerSettings>,
    /// Models the host calls for the agent (docs/llm.md).
    #[serde(default)]
    pub llm: crate::runtime::llm::settings::LlmSection,
}

/// Longest `[routes."<route>"] description`, in characters.
pub(crate) const MAX_ROUTE_DESCRIPTION: usize = 1024;
/// Largest `[routes."<route>"] input_schema`, as JSON.
pub(crate) const MAX_INPUT_SCHEMA_BYTES: usize = 16 * 1024;

/// `[routes."<route>"]`: a route's tool as MCP clients see it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RouteSettings {
    /// The tool's description.
    pub description: Option<String>,
    /// The tool's input schema (a JSON Schema of `"type": "object"`): the
    /// call's arguments, without `session_id`, are the turn's input.
    pub input_schema: Option<serde_json::Value>,
}

impl RouteSettings {
    fn check(&self, route: &str) -> Result<(), ManifestError> {
        let invalid =
            |what: String| ManifestError::Invalid(format!("`[routes.\"{route}\"]`: {what}"));
        if !route.starts_with('/') {
            return Err(invalid("a route starts with `/`".into()));
        }
        if let Some(description) = &self.description
            && description.chars().count() > MAX_ROUTE_DESCRIPTION
        {
            return Err(invalid(format!(
                "`description` is longer than {MAX_ROUTE_DESCRIPTION} characters"
            )));
        }
        if let Some(schema) = &self.input_schema {
            if schema.get("type").and_then(|t| t.as_str()) != Some("object") {
                return Err(invalid(
                    "`input_schema` must be a JSON Schema with `type = \"object\"`".into(),
                ));
            }
            if schema.to_string().len() > MAX_INPUT_SCHEMA_BYTES {
                return Err(invalid(format!(
                    "`input_schema` is larger than {MAX_INPUT_SCHEMA_BYTES} bytes as JSON"
                )));
            }
        }
        Ok(())
    }
}

/// Most claims `[end_users] claims` may list.
pub(crate) const MAX_END_USER_CLAIMS: usize = 32;
/// The highest `[end_users] turns_per_minute_per_user`: a user's turns of
/// the last minute are one stored row of at most this many times.
pub(crate) const MAX_TURNS_PER_MINUTE_PER_USER: u64 = 1000;

/// `[end_users]`: the app's end-user policy and identity provider.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EndUsersSection {
    /// The bare invocation key may not create or touch sessions.
    #[serde(default)]
    pub required: bool,
    /// Token claims that reach the journal and the agent.
    #[serde(default)]
    pub claims: Vec<String>,
    /// The identity provider's JWKS (all three or none).
    pub jwks_url: Option<String>,
    pub issuer: Option<String>,
    pub audience: Option<String>,
    /// Open sessions one end user may have of this app.
    pub max_open_sessions_per_user: Option<u64>,
    /// Turns one end user may start in any 60 s.
    pub turns_per_minute_per_user: Option<u64>,
    /// The session's own end user may set one-shot schedules on it.
    #[serde(default)]
    pub schedules: bool,
}

impl From<&EndUsersSection> for crate::store::EndUsersRecord {
    fn from(s: &EndUsersSection) -> Self {
        crate::store::EndUsersRecord {
            required: s.required,
            claims: s.claims.clone(),
            jwks_url: s.jwks_url.clone(),
            issuer: s.issuer.clone(),
            audience: s.audience.clone(),
            max_open_sessions_per_user: s.max_open_sessions_per_user,
            turns_per_minute_per_user: s.turns_per_minute_per_user,
            schedules: s.schedules,
        }
    }
}

impl EndUsersSection {
    fn check(&self) -> Result<(), ManifestError> {
        if self.claims.len() > MAX_END_USER_CLAIMS {
            return Err(ManifestError::Invalid(format!(
                "`end_users.claims` lists more than {MAX_END_USER_CLAIMS} claims"
            )));
        }
        if let Some(claim) = self.claims.iter().find(|c| c.is_empty() || c.len() > 64) {
            return Err(ManifestError::Invalid(format!(
                "`end_users.claims`: {claim:?} is not a claim name (1 to 64 characters)"
            )));
        }
        if self.max_open_sessions_per_user == Some(0) {
            return Err(ManifestError::Invalid(
                "`end_users.max_open_sessions_per_user` must be 1 or more (leave it out for no cap)"
                    .into(),
            ));
        }
        if let Some(rate) = self.turns_per_minute_per_user
            && !(1..=MAX_TURNS_PER_MINUTE_PER_USER).contains(&rate)
        {
            return Err(ManifestError::Invalid(format!(
                "`end_users.turns_per_minute_per_user` must be 1 to {MAX_TURNS_PER_MINUTE_PER_USER} (leave it out for no cap)"
            )));
        }
        let idp = [&self.jwks_url, &self.issuer, &self.audience];
        let set = idp.iter().filter(|v| v.is_some()).count();
        if set != 0 && set != idp.len() {
            return Err(ManifestError::Invalid(
                "`[end_users]`: `jwks_url`, `issuer` and `audience` go together: set all three or none"
                    .into(),
            ));
        }
        if let Some(url) = &self.jwks_url
            && !(url.starts_with("https://") || url.starts_with("http://"))
        {
            return Err(ManifestError::Invalid(format!(
                "`end_users.jwks_url` = {url:?}: use an https:// URL"
            )));
        }
        Ok(())
    }
}

/// Most origins one manifest may list.
pub(crate) const MAX_OUTBOUND_ORIGINS: usize = 64;

/// `[outbound]`: the origins the agent may call; none by default.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutboundSection {
    #[serde(default)]
    pub allow: Vec<String>,
}

/// `[limits]`: unknown keys are refused here, where a person can fix them.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsSection {
    pub wall_clock_secs: Option<u64>,
    pub cpu_fuel: Option<u64>,
    pub memory_mb: Option<u64>,
    pub max_events: Option<u64>,
    pub max_open_messages: Option<u64>,
    pub max_output_mb: Option<u64>,
    pub approval_timeout_secs: Option<u64>,
}

impl From<&LimitsSection> for LimitsRecord {
    fn from(s: &LimitsSection) -> Self {
        LimitsRecord {
            wall_clock_secs: s.wall_clock_secs,
            cpu_fuel: s.cpu_fuel,
            memory_mb: s.memory_mb,
            max_events: s.max_events,
            max_open_messages: s.max_open_messages,
            max_output_mb: s.max_output_mb,
            approval_timeout_secs: s.approval_timeout_secs,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ToolSettings {
    /// Calls of this tool wait for a human decision (in addition to the
    /// agent's own flag and the operator's policy).
    #[serde(default)]
    pub needs_approval: bool,
    /// Who may decide its calls: operators (platform keys, the default), or
    /// also the session's own end user.
    #[serde(default)]
    pub approver: Approver,
}

/// `[tools.<name>] approver`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Approver {
    #[default]
    Operator,
    EndUser,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AppSection {
    /// The app's slug: created on its first deploy.
    pub slug: String,
    /// Pins this deployment's version; refused when that version exists.
    #[serde(default)]
    pub version: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentSection {
    /// What the agent is written in: how `agenthost deploy` builds it.
    #[serde(default)]
    pub language: Language,
    /// Path of the component inside the bundle; required for Rust (cargo
    /// names the file), `agent.wasm` by default for the other languages.
    #[serde(default)]
    entry: Option<String>,
    /// Secrets injected into the agent's environment at each turn.
    #[serde(default)]
    pub secrets: Vec<String>,
}

/// `[agent] language`: which toolchain builds the agent's component
/// (`cli::lang`). The server runs every component the same way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Language {
    /// A Rust `cdylib` built with cargo for wasm32-wasip2.
    #[default]
    Rust,
    /// An `app.py` built with componentize-py and the Python SDK.
    Python,
    /// An `agent.ts` bundled with esbuild and built with componentize-js
    /// and the TypeScript SDK.
    TypeScript,
}

impl Language {
    /// The manifest's spelling.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::TypeScript => "typescript",
        }
    }

    /// Where the component goes in the bundle when `agent.entry` is not set.
    fn default_entry(self) -> Option<&'static str> {
        match self {
            Language::Rust => None,
            Language::Python | Language::TypeScript => Some("agent.wasm"),
        }
    }
}

impl AgentSection {
    /// Path of the component inside the bundle (`Manifest::parse` made sure there is one).
    pub(crate) fn entry(&self) -> &str {
        self.entry
            .as_deref()
            .or(self.language.default_entry())
            .unwrap_or_default()
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ManifestError {
    #[error("the manifest is larger than {MAX_MANIFEST_BYTES} bytes")]
    TooLarge,
    #[error("the manifest is not valid TOML for agenthost: {0}")]
    Syntax(String),
    #[error("{0}")]
    Invalid(String),
}

impl Manifest {
    pub(crate) fn parse(text: &str) -> Result<Manifest, ManifestError> {
        if text.len() > MAX_MANIFEST_BYTES {
            return Err(ManifestError::TooLarge);
        }
        let manifest: Manifest = toml::from_str(text)
            .map_err(|e| ManifestError::Syntax(e.to_string().trim().to_string()))?;
        if !valid_slug(&manifest.app.slug) {
            return Err(ManifestError::Invalid(format!(
                "`app.slug` = {:?}: use 1 to 63 lowercase letters, digits and -, starting with a letter or digit (and not shaped like a UUID)",
                manifest.app.slug
            )));
        }
        let agent = &manifest.agent;
        if agent.entry.is_none() && agent.language.default_entry().is_none() {
            return Err(ManifestError::Invalid(format!(
                "`agent.entry` is required for a {} agent: the path of the built component in the bundle",
                agent.language.as_str()
            )));
        }
        if agent.entry().trim().is_empty() {
            return Err(ManifestError::Invalid(
                "`agent.entry` must not be empty".into(),
            ));
        }
        if crate::build::unpack::safe_relative_path(agent.entry()).is_none() {
            return Err(ManifestError::Invalid(format!(
                "`agent.entry` = {:?} must be a relative path inside the bundle",
                agent.entry()
            )));
        }
        if let Some(name) = manifest.tools.keys().find(|name| !valid_tool_name(name)) {
            return Err(ManifestError::Invalid(format!(
                "`[tools.{name}]`: a tool name is 1 to 64 letters, digits, _ or -"
            )));
        }
        if let Some(name) = manifest
            .agent
            .secrets
            .iter()
            .find(|n| !crate::secrets::valid_name(n))
        {
            return Err(ManifestError::Invalid(format!(
                "`agent.secrets`: `{name}` is not a secret name (letters, digits and _, not starting with a digit, SERVICE_ or AGENTHOST_)"
            )));
        }
        if manifest.outbound.allow.len() > MAX_OUTBOUND_ORIGINS {
            return Err(ManifestError::Invalid(format!(
                "`outbound.allow` lists more than {MAX_OUTBOUND_ORIGINS} origins"
            )));
        }
        for origin in &manifest.outbound.allow {
            crate::runtime::outbound::OriginPattern::parse(origin)
                .map_err(|e| ManifestError::Invalid(format!("`outbound.allow`: {e}")))?;
        }
        if let Some(end_users) = &manifest.end_users {
            end_users.check()?;
        }
        for (route, settings) in &manifest.routes {
            settings.check(route)?;
        }
        crate::runtime::mcp::settings::check(&manifest.mcp, &manifest.outbound.allow)
            .map_err(ManifestError::Invalid)?;
        // An own tool wearing an MCP server's prefix would be taken for its tool.
        for tool in manifest.tools.keys() {
            if let Some(server) =
                (manifest.mcp.keys()).find(|s| tool.starts_with(&format!("{s}__")))
            {
                return Err(ManifestError::Invalid(format!(
                    "`[tools.{tool}]` starts with `{server}__`, the prefix of the MCP server `[mcp.{server}]`'s tools: rename the tool or the server"
                )));
            }
        }
        crate::runtime::llm::settings::check(&manifest.llm, &manifest.outbound.allow)
            .map_err(ManifestError::Invalid)?;
        let limits = &manifest.limits;
        let set = [
            (limits.wall_clock_secs, &WALL_CLOCK_SECS),
            (limits.cpu_fuel, &CPU_FUEL),
            (limits.memory_mb, &MEMORY_MB),
            (limits.max_events, &MAX_EVENTS),
            (limits.max_open_messages, &MAX_OPEN_MESSAGES),
            (limits.max_output_mb, &MAX_OUTPUT_MB),
        ];
        debug_assert_eq!(set.len(), BOUNDS.len());
        for (value, bound) in set {
            if let Some(value) = value
                && (value == 0 || value > bound.max)
            {
                return Err(ManifestError::Invalid(format!(
                    "`limits.{}` = {value}: use 1 to {} (the server's maximum)",
                    bound.key, bound.max
                )));
            }
        }
        let max = APPROVAL_TIMEOUT_MAX_SECS;
        if let Some(value) = limits.approval_timeout_secs
            && (value == 0 || value > max)
        {
            return Err(ManifestError::Invalid(format!(
                "`limits.approval_timeout_secs` = {value}: use 1 to {max} (30 days)"
            )));
        }
        if manifest.app.version == Some(0) {
            return Err(ManifestError::Invalid(
                "`app.version` must be 1 or more".into(),
            ));
        }
        Ok(manifest)
    }
}

impl Manifest {
    /// The tools this manifest gates.
    /// Tools whose calls the session's end user may decide.
    pub(crate) fn end_user_approvals(&self) -> Vec<String> {
        (self.tools.iter())
            .filter(|(_, settings)| settings.approver == Approver::EndUser)
            .map(|(name, _)| name.clone())
            .collect()
    }

    pub(crate) fn gated_tools(&self) -> Vec<String> {
        (self.tools.iter())
            .filter(|(_, settings)| settings.needs_approval)
            .map(|(name, _)| name.clone())
            .collect()
    }
}

pub(crate) fn valid_slug(slug: &str) -> bool {
    (1..=63).contains(&slug.len())
        && slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !slug.starts_with('-')
        // Apps are addressed by id or slug: a slug must never read as an id.
        && uuid::Uuid::parse_str(slug).is_err()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_users_share_of_turns_is_one_to_a_thousand() {
        let with = |rate: &str| {
            Manifest::parse(&format!(
                "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n[end_users]\nturns_per_minute_per_user = {rate}\n"
            ))
        };
        let m = with("20").unwrap();
        let record = crate::store::EndUsersRecord::from(m.end_users.as_ref().unwrap());
        assert_eq!(record.turns_per_minute_per_user, Some(20));
        for bad in ["0", "1001"] {
            let err = with(bad).unwrap_err().to_string();
            assert!(err.contains("turns_per_minute_per_user"), "{err}");
        }
    }

    #[test]
    fn end_users_schedules_is_off_unless_the_manifest_says_true() {
        let with = |table: &str| {
            let m = Manifest::parse(&format!(
                "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n[end_users]\n{table}"
            ))
            .unwrap();
            crate::store::EndUsersRecord::from(m.end_users.as_ref().unwrap()).schedules
        };
        assert!(!with(""));
        assert!(with("schedules = true\n"));
        let text =
            "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n[end_users]\nschedules = \"yes\"\n";
        assert!(Manifest::parse(text).is_err());
    }

    #[test]
    fn accepts_a_minimal_manifest() {
        let m =
            Manifest::parse("[app]\nslug = \"hello\"\n[agent]\nentry = \"hello.wasm\"\n").unwrap();
        assert_eq!(m.app.slug, "hello");
        assert_eq!(m.agent.entry(), "hello.wasm");
        assert_eq!(m.agent.language, Language::Rust);
        assert_eq!(m.app.version, None);
    }

    #[test]
    fn reads_the_language_and_its_default_entry() {
        let m = Manifest::parse("[app]\nslug = \"a\"\n[agent]\nlanguage = \"python\"\n").unwrap();
        assert_eq!(m.agent.language, Language::Python);
        assert_eq!(m.agent.entry(), "agent.wasm");
        let m = Manifest::parse(
            "[app]\nslug = \"a\"\n[agent]\nlanguage = \"python\"\nentry = \"build/x.wasm\"\n",
        )
        .unwrap();
        assert_eq!(m.agent.entry(), "build/x.wasm");
        let err = Manifest::parse("[app]\nslug = \"a\"\n[agent]\nlanguage = \"cobol\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown variant `cobol`"), "{err}");
        assert!(err.contains("`rust`") && err.contains("`python`"), "{err}");
        assert!(err.contains("`typescript`"), "{err}");
        let m =
            Manifest::parse("[app]\nslug = \"a\"\n[agent]\nlanguage = \"typescript\"\n").unwrap();
        assert_eq!(m.agent.language, Language::TypeScript);
        assert_eq!(m.agent.entry(), "agent.wasm");
        let err = Manifest::parse("[app]\nslug = \"a\"\n[agent]\nsecrets = []\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`agent.entry` is required for a rust agent"),
            "{err}"
        );
    }

    #[test]
    fn reads_gated_tools() {
        let m = Manifest::parse(
            "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n[tools.rm]\nneeds_approval = true\n[tools.ls]\n",
        )
        .unwrap();
        assert_eq!(m.gated_tools(), vec!["rm".to_string()]);
        let err = Manifest::parse(
            "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n[tools.rm]\nneeds_aproval = true\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("needs_aproval"), "{err}");
    }

    #[test]
    fn limits_stay_within_the_servers_maxima() {
        let base = "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n[limits]\n";
        let m = Manifest::parse(&format!("{base}wall_clock_secs = 2\nmemory_mb = 32\n")).unwrap();
        assert_eq!(m.limits.wall_clock_secs, Some(2));
        let err = Manifest::parse(&format!("{base}memory_mb = 999999\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("limits.memory_mb") && err.contains("2048"),
            "{err}"
        );
        let m =
            Manifest::parse(&format!("{base}max_open_messages = 4\nmax_output_mb = 8\n")).unwrap();
        let limits = crate::runtime::limits::TurnLimits::from_record(&(&m.limits).into());
        assert_eq!(
            (limits.max_open_messages, limits.max_output_bytes),
            (4, 8 << 20)
        );
        for (key, max) in [("max_open_messages", 64), ("max_output_mb", 1024)] {
            for value in [0, max + 1] {
                let err = Manifest::parse(&format!("{base}{key} = {value}\n"))
                    .unwrap_err()
                    .to_string();
                let expected = format!("`limits.{key}` = {value}: use 1 to {max}");
                assert!(err.contains(&expected), "{err}");
            }
        }
        let err = Manifest::parse(&format!("{base}gpus = 1\n"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("gpus"), "{err}");
    }

    #[test]
    fn names_an_unknown_key() {
        let err = Manifest::parse("[app]\nslug = \"a\"\ncolour = 1\n[agent]\nentry = \"a.wasm\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("colour"), "{err}");
    }

    #[test]
    fn refuses_empty_or_escaping_entries_and_bad_slugs() {
        for (text, needle) in [
            (
                "[app]\nslug = \"a\"\n[agent]\nentry = \"\"\n",
                "agent.entry",
            ),
            (
                "[app]\nslug = \"a\"\n[agent]\nentry = \"../x.wasm\"\n",
                "agent.entry",
            ),
            ("[app]\nslug = \"a\"\n", "agent"),
            (
                "[app]\nslug = \"Big App\"\n[agent]\nentry = \"a.wasm\"\n",
                "app.slug",
            ),
            (
                "[app]\nslug = \"0190a5b2-0000-7000-8000-000000000000\"\n[agent]\nentry = \"a.wasm\"\n",
                "app.slug",
            ),
            ("not toml at all [", "TOML"),
        ] {
            let err = Manifest::parse(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text:?} gave {err}");
        }
    }
}

#[cfg(test)]
mod route_tests {
    use super::*;

    #[test]
    fn a_routes_tool_settings_are_checked() {
        let base = "[app]\nslug = \"a\"\n[agent]\nentry = \"a.wasm\"\n";
        let m = Manifest::parse(&format!(
            "{base}[routes.\"/chat\"]\ndescription = \"Talk\"\ninput_schema = {{ type = \"object\", properties = {{ city = {{ type = \"string\" }} }} }}\n"
        ))
        .unwrap();
        let chat = &m.routes["/chat"];
        assert_eq!(chat.description.as_deref(), Some("Talk"));
        assert_eq!(
            chat.input_schema.as_ref().unwrap()["properties"]["city"]["type"],
            "string"
        );
        for bad in [
            "[routes.\"chat\"]\ndescription = \"x\"\n".to_string(),
            "[routes.\"/c\"]\ninput_schema = { type = \"string\" }\n".to_string(),
            format!("[routes.\"/c\"]\ndescription = \"{}\"\n", "x".repeat(1025)),
            "[routes.\"/c\"]\nother = 1\n".to_string(),
        ] {
            assert!(Manifest::parse(&format!("{base}{bad}")).is_err(), "{bad}");
        }
    }
}
