//! Secrets and redaction for turns: a deployment's declared secret names
//! are read once, when it is loaded (`DeclaredSecrets::configure`); their
//! values are read from the `Vault` at each turn's start (`prepare`),
//! since a secret may be set through the API at any time and the next turn
//! must see it; the turn's `Redactor` is made from them and from its MCP
//! servers' secrets (`redactor`).

use std::sync::Arc;

use super::gate::Failure;
use crate::journal::TurnErrorKind;
use crate::redact::Redactor;
use crate::secrets::Vault;
use crate::store::DeploymentRecord;

/// The secrets an instance's environment was made with: name, value.
pub(super) type Secrets = Vec<(String, Arc<str>)>;

/// The secrets a deployment declares.
#[derive(Clone, Default)]
pub(super) struct DeclaredSecrets(Arc<[String]>);

impl DeclaredSecrets {
    pub(super) fn configure(record: &DeploymentRecord) -> DeclaredSecrets {
        DeclaredSecrets(record.secrets.clone().into())
    }

    /// Their values now; a missing one fails the turn.
    pub(super) fn prepare(&self, vault: &Vault) -> Result<Secrets, Failure> {
        let mut secrets = Vec::with_capacity(self.0.len());
        for name in self.0.iter() {
            let value = vault.get(name).ok_or_else(|| Failure {
                kind: TurnErrorKind::MissingSecret,
                message: format!(
                    "the deployment declares secret `{name}`, which does not exist: set it with PUT /secrets/{name}"
                ),
            })?;
            secrets.push((name.clone(), value));
        }
        Ok(secrets)
    }
}

/// The turn's redactor: the values of its declared secrets (those it
/// could read) and of its MCP servers' secrets, which never reach the
/// guest but are redacted from everything the turn journals all the same.
pub(super) fn redactor(secrets: &Result<Secrets, Failure>, mcp: Secrets) -> Redactor {
    match secrets {
        Ok(secrets) => Redactor::new(secrets.iter().cloned().chain(mcp).collect()),
        Err(_) => Redactor::new(mcp),
    }
}
