//! The manifest's `[llm.<alias>]` sections: models the host calls for the
//! agent (docs/llm.md), checked at upload (`build::manifest`) and read back
//! from a deployment's stored manifest.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::runtime::outbound::OriginPattern;
use crate::runtime::outbound::origin::Origin;

/// Most `[llm.<alias>]` sections one manifest may declare.
pub(crate) const MAX_LLM_ALIASES: usize = 16;
/// Most aliases one `fallbacks` list may name.
pub(crate) const MAX_LLM_FALLBACKS: usize = 4;
/// Longest alias.
pub(crate) const MAX_LLM_ALIAS: usize = 32;
/// `max_output_tokens` when it is left out, and its largest value.
pub(crate) const LLM_MAX_OUTPUT_TOKENS: u32 = 4096;
pub(crate) const LLM_MAX_OUTPUT_TOKENS_MAX: u32 = 128_000;
/// Longest `model`.
const MAX_MODEL_NAME: usize = 128;

/// The wire format an alias speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Provider {
    /// OpenAI Chat Completions (`{base_url}/chat/completions`).
    Openai,
    /// Anthropic Messages (`{base_url}/messages`).
    Anthropic,
}

impl Provider {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Provider::Openai => "openai",
            Provider::Anthropic => "anthropic",
        }
    }
}

/// `api_key = { secret = "NAME" }`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SecretRef {
    pub secret: String,
}

/// `price = { input_per_mtok, output_per_mtok }`: money per million tokens.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

/// `[llm.<alias>]`: one model the agent may ask for.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LlmSettings {
    pub provider: Provider,
    /// Such as `https://api.openai.com/v1`; its origin must be in `[outbound] allow`.
    pub base_url: String,
    pub model: String,
    /// The key, sent by the host (`Authorization: Bearer` or `x-api-key`).
    pub api_key: Option<SecretRef>,
    /// Aliases tried in order when this one fails before its first token.
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// The output-token cap sent with every request.
    pub max_output_tokens: Option<u32>,
    pub price: Option<Price>,
}

/// `[llm]`: the declared models (`[llm.<alias>]`) and the spend limit of
/// each session (`budget_per_session`, docs/llm.md "Budgets").
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct LlmSection {
    /// The budget every session of the deployment starts with (none by
    /// default); `PATCH /sessions/{id}` sets a session's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_per_session: Option<crate::store::Budget>,
    #[serde(flatten)]
    pub aliases: BTreeMap<String, LlmSettings>,
}

/// Read by hand: every key but `budget_per_session` is an alias, parsed on
/// its own so that its errors still show the offending line.
impl<'de> Deserialize<'de> for LlmSection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = toml::Table::deserialize(d)?;
        let budget_per_session = match table.remove("budget_per_session") {
            None => None,
            Some(value) => Some(value.try_into::<crate::store::Budget>().map_err(|e| {
                D::Error::custom(format!("`llm.budget_per_session`: {}", e.message()))
            })?),
        };
        let mut aliases = BTreeMap::new();
        for (alias, value) in table {
            let toml::Value::Table(settings) = value else {
                return Err(D::Error::custom(format!(
                    "`llm.{alias}` is neither `budget_per_session` nor a `[llm.<alias>]` table"
                )));
            };
            let text = toml::to_string(&settings).map_err(D::Error::custom)?;
            let settings = toml::from_str::<LlmSettings>(&text)
                .map_err(|e| D::Error::custom(format!("`[llm.{alias}]`: {e}")))?;
            aliases.insert(alias, settings);
        }
        Ok(LlmSection {
            budget_per_session,
            aliases,
        })
    }
}

/// Whether `name` may name an alias: 1 to 32 letters, digits, `_` or `-`.
pub(crate) fn valid_alias(name: &str) -> bool {
    (1..=MAX_LLM_ALIAS).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl LlmSettings {
    pub(crate) fn max_output_tokens(&self) -> u32 {
        self.max_output_tokens.unwrap_or(LLM_MAX_OUTPUT_TOKENS)
    }

    /// The endpoint a completion is posted to.
    pub(crate) fn url(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        match self.provider {
            Provider::Openai => format!("{base}/chat/completions"),
            Provider::Anthropic => format!("{base}/messages"),
        }
    }

    fn check(
        &self,
        alias: &str,
        all: &BTreeMap<String, LlmSettings>,
        allow: &[String],
    ) -> Result<(), String> {
        let invalid = |what: String| format!("`[llm.{alias}]`: {what}");
        if !valid_alias(alias) {
            return Err(invalid(format!(
                "an alias is 1 to {MAX_LLM_ALIAS} letters, digits, _ or -"
            )));
        }
        let uri: http::Uri = (self.base_url.parse())
            .map_err(|_| invalid(format!("`base_url` = {:?} is not a URL", self.base_url)))?;
        if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
            return Err(invalid(
                "`base_url` must not carry credentials (use `api_key`)".into(),
            ));
        }
        if uri.query().is_some() {
            return Err(invalid("`base_url` must not carry a query string".into()));
        }
        let origin = Origin::of(&uri).ok_or_else(|| {
            invalid(format!(
                "`base_url` = {:?}: use an http:// or https:// URL",
                self.base_url
            ))
        })?;
        let declared = allow.iter().filter_map(|a| OriginPattern::parse(a).ok());
        if !declared.into_iter().any(|p| p.matches(&origin)) {
            return Err(invalid(format!(
                "the origin of `base_url` ({origin}) is not in `[outbound] allow`: add it there"
            )));
        }
        if self.model.is_empty() || self.model.len() > MAX_MODEL_NAME {
            return Err(invalid(format!(
                "`model` is 1 to {MAX_MODEL_NAME} characters"
            )));
        }
        if let Some(key) = &self.api_key
            && !crate::secrets::valid_name(&key.secret)
        {
            return Err(invalid(format!(
                "`{}` is not a secret name (letters, digits and _, not starting with a digit, SERVICE_ or AGENTHOST_)",
                key.secret
            )));
        }
        if self.fallbacks.len() > MAX_LLM_FALLBACKS {
            return Err(invalid(format!(
                "`fallbacks` names more than {MAX_LLM_FALLBACKS} aliases"
            )));
        }
        for fallback in &self.fallbacks {
            if fallback == alias {
                return Err(invalid("`fallbacks` names the alias itself".into()));
            }
            if !all.contains_key(fallback) {
                return Err(invalid(format!(
                    "`fallbacks` names `{fallback}`, which is not a `[llm.<alias>]`"
                )));
            }
        }
        if let Some(max) = self.max_output_tokens
            && (max == 0 || max > LLM_MAX_OUTPUT_TOKENS_MAX)
        {
            return Err(invalid(format!(
                "`max_output_tokens` = {max}: use 1 to {LLM_MAX_OUTPUT_TOKENS_MAX}"
            )));
        }
        if let Some(price) = self.price {
            let fine = |v: f64| v.is_finite() && v >= 0.0;
            if !fine(price.input_per_mtok) || !fine(price.output_per_mtok) {
                return Err(invalid(
                    "`price`: `input_per_mtok` and `output_per_mtok` are numbers of 0 or more"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

/// Checks every `[llm.<alias>]` section against the manifest's allowlist,
/// that `fallbacks` name declared aliases without a cycle, and the budget
/// (money needs a `price` on every alias).
pub(crate) fn check(section: &LlmSection, allow: &[String]) -> Result<(), String> {
    let aliases = &section.aliases;
    if let Some(budget) = &section.budget_per_session {
        budget
            .check()
            .map_err(|why| format!("`llm.budget_per_session`: {why}"))?;
        if budget.cost.is_some() {
            if aliases.is_empty() {
                return Err("`llm.budget_per_session` is in money (`cost`) but no `[llm.<alias>]` is declared".into());
            }
            if let Some(alias) = aliases.iter().find(|(_, s)| s.price.is_none()) {
                return Err(format!(
                    "`llm.budget_per_session` is in money (`cost`): `[llm.{}]` needs a `price`",
                    alias.0
                ));
            }
        }
    }
    if aliases.len() > MAX_LLM_ALIASES {
        return Err(format!(
            "more than {MAX_LLM_ALIASES} `[llm.<alias>]` models"
        ));
    }
    for (alias, settings) in aliases {
        settings.check(alias, aliases, allow)?;
    }
    let mut done = std::collections::HashSet::new();
    for alias in aliases.keys() {
        if let Some(cycle) = cycle_from(aliases, alias, &mut Vec::new(), &mut done) {
            return Err(format!(
                "`[llm.{alias}]`: `fallbacks` make a cycle: {}",
                cycle.join(" -> ")
            ));
        }
    }
    Ok(())
}

/// A fallback path from `alias` that comes back to an alias on `path`
/// (`done`: aliases from which no cycle is reachable).
fn cycle_from(
    aliases: &BTreeMap<String, LlmSettings>,
    alias: &str,
    path: &mut Vec<String>,
    done: &mut std::collections::HashSet<String>,
) -> Option<Vec<String>> {
    if path.iter().any(|a| a == alias) {
        let mut cycle = path.clone();
        cycle.push(alias.to_string());
        return Some(cycle);
    }
    if done.contains(alias) {
        return None;
    }
    path.push(alias.to_string());
    for next in aliases
        .get(alias)
        .map(|s| s.fallbacks.as_slice())
        .unwrap_or_default()
    {
        if let Some(cycle) = cycle_from(aliases, next, path, done) {
            return Some(cycle);
        }
    }
    path.pop();
    done.insert(alias.to_string());
    None
}

/// Only the `[llm]` tables of a manifest (the rest was checked at upload).
#[derive(Deserialize)]
struct LlmOnly {
    #[serde(default)]
    llm: LlmSection,
}

/// The `[llm]` section of a stored manifest (empty if it no longer parses).
pub(crate) fn read(manifest: &str) -> LlmSection {
    toml::from_str::<LlmOnly>(manifest)
        .map(|m| m.llm)
        .unwrap_or_default()
}
