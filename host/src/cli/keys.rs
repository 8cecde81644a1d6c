//! `agenthost keys create|list|revoke`: the API-key endpoints from the shell
//! (standing in for a dashboard).

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::{Value, json};

use super::Remote;

#[derive(Subcommand)]
pub enum KeysAction {
    /// Mint a key; its secret is printed once.
    Create {
        /// `platform` (organisation-wide) or `invocation` (one app's sessions).
        #[arg(long)]
        class: String,
        /// A name for people (also the default approver of its decisions).
        #[arg(long)]
        name: String,
        /// The app (slug or id) of an invocation key.
        #[arg(long)]
        app: Option<String>,
    },
    /// List keys (never their secrets).
    List,
    /// Revoke a key at once.
    Revoke {
        /// The key's id (see `list`).
        id: String,
    },
}

pub async fn keys(remote: &Remote, action: KeysAction) -> anyhow::Result<()> {
    let base = remote.url.trim_end_matches('/');
    let client = reqwest::Client::new();
    let request = match &action {
        KeysAction::Create { class, name, app } => {
            let mut body = json!({"class": class, "name": name});
            if let Some(app) = app {
                body["app"] = json!(app);
            }
            client.post(format!("{base}/api-keys")).json(&body)
        }
        KeysAction::List => client.get(format!("{base}/api-keys")),
        KeysAction::Revoke { id } => client.delete(format!("{base}/api-keys/{id}")),
    };
    let response = request
        .bearer_auth(&remote.api_key)
        .send()
        .await
        .with_context(|| format!("cannot reach {base}"))?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let message = body["error"]["message"].as_str().unwrap_or("(no message)");
        bail!("the server refused ({status}): {message}");
    }
    match action {
        KeysAction::Create { .. } => {
            println!("id:  {}", body["id"].as_str().unwrap_or_default());
            println!("key: {}", body["key"].as_str().unwrap_or_default());
            println!("(the key is shown once: store it now)");
        }
        KeysAction::List => {
            for key in body.as_array().into_iter().flatten() {
                let field = |name: &str| key[name].as_str().unwrap_or("-").to_string();
                println!(
                    "{:<18} {:<11} {:<14} {:<38} used {:<26} {}",
                    field("id"),
                    field("class"),
                    field("prefix"),
                    field("app_id"),
                    field("last_used_at"),
                    field("name"),
                );
            }
        }
        KeysAction::Revoke { id } => println!("revoked {id}"),
    }
    Ok(())
}
