//! `ModelConfig`: which OpenAI-compatible API to call, with which key and
//! model, read from the agent's environment (where the host puts the
//! secrets the manifest declares).

use std::fmt;

use super::error::LlmError;

/// The base URL used when `OPENAI_BASE_URL` is not set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Where and how to call the model.
#[derive(Clone, PartialEq, Eq)]
pub struct ModelConfig {
    /// The API's base URL, such as `https://api.openai.com/v1`; requests go
    /// to `{base_url}/chat/completions`. Its origin must be on the
    /// deployment's outbound allowlist.
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>` when set.
    pub api_key: Option<String>,
    /// The model's name, such as `gpt-4o-mini`.
    pub model: String,
}

impl ModelConfig {
    /// Reads `OPENAI_BASE_URL` (default [`DEFAULT_BASE_URL`]),
    /// `OPENAI_API_KEY` (optional) and `OPENAI_MODEL` (required) from the
    /// environment. Declare them in the manifest's `[agent] secrets` and
    /// set them with `PUT /secrets/<NAME>`. Empty values count as unset.
    pub fn from_env() -> Result<Self, LlmError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The same, from any lookup (for tests).
    pub(crate) fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, LlmError> {
        let get = |name: &str| {
            get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let model = get("OPENAI_MODEL").ok_or_else(|| {
            LlmError::Config(
                "OPENAI_MODEL is not set: declare it in `[agent] secrets` of agenthost.toml \
                 and set it with PUT /secrets/OPENAI_MODEL"
                    .into(),
            )
        })?;
        Ok(ModelConfig {
            base_url: get("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.into()),
            api_key: get("OPENAI_API_KEY"),
            model,
        })
    }

    /// `{base_url}/chat/completions`.
    pub(crate) fn completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

/// Never shows the key.
impl fmt::Debug for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("model", &self.model)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn defaults_and_required_values() {
        let config = ModelConfig::from_lookup(lookup(&[("OPENAI_MODEL", "gpt-test")])).unwrap();
        assert_eq!(config.base_url, DEFAULT_BASE_URL);
        assert_eq!(config.api_key, None);
        assert_eq!(
            config.completions_url(),
            "https://api.openai.com/v1/chat/completions"
        );

        let config = ModelConfig::from_lookup(lookup(&[
            ("OPENAI_MODEL", "m"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9000/v1/"),
            ("OPENAI_API_KEY", "sk-test"),
        ]))
        .unwrap();
        assert_eq!(
            config.completions_url(),
            "http://127.0.0.1:9000/v1/chat/completions"
        );
        assert_eq!(config.api_key.as_deref(), Some("sk-test"));
        assert!(!format!("{config:?}").contains("sk-test"));

        let missing = ModelConfig::from_lookup(lookup(&[("OPENAI_MODEL", " ")])).unwrap_err();
        assert!(
            missing.to_string().contains("OPENAI_MODEL is not set"),
            "{missing}"
        );
        let empty_key =
            ModelConfig::from_lookup(lookup(&[("OPENAI_MODEL", "m"), ("OPENAI_API_KEY", "")]));
        assert_eq!(empty_key.unwrap().api_key, None);
    }
}
