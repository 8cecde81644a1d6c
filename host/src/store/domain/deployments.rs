//! The deployment rules: versions, build results, and the current
//! deployment (the newest successful build, unless one is activated).

use uuid::Uuid;

use super::idempotency::{DeploymentAnswer, Remembered};
use super::{BuildOutcome, NewDeployment};
use crate::store::Missing;
use crate::store::batch::{Batch, Hook, Op};
use crate::store::engine::WriteTx;
use crate::store::error::corrupt;
use crate::store::records::{AppRecord, Artifact, DeploymentRecord, DeploymentStatus};
use crate::store::{StoreError, now_rfc3339};

/// Registers a deployment in status `building`; creates the app on its
/// first deploy and assigns the version (the next free one, or the pinned one).
pub(in crate::store) struct CreateDeployment(pub NewDeployment);

impl Op for CreateDeployment {
    type Output = DeploymentRecord;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<DeploymentRecord, StoreError> {
        let new = &self.0;
        let tx = &mut *batch.tx;
        let now = now_rfc3339();
        let app = match tx.app_for_update(&new.app_slug)? {
            Some(app) => app,
            None => {
                let app = AppRecord {
                    id: Uuid::now_v7(),
                    slug: new.app_slug.clone(),
                    created_at: now.clone(),
                    current_deployment: None,
                    schedules: Vec::new(),
                };
                tx.put_app(&app, true)?;
                app
            }
        };
        let version = match new.version {
            Some(0) => return Err(StoreError::Rejected("version must be 1 or more".into())),
            Some(v) => {
                if tx.version_exists(app.id, v)? {
                    return Err(StoreError::Rejected(format!(
                        "version {v} of app `{}` already exists",
                        app.slug
                    )));
                }
                v
            }
            None => tx.latest_version(app.id)?.map_or(1, |v| v + 1),
        };
        let record = DeploymentRecord {
            id: Uuid::now_v7(),
            app_id: app.id,
            version,
            status: DeploymentStatus::Building,
            created_at: now,
            finished_at: None,
            error: None,
            manifest: new.manifest.clone(),
            entry: new.entry.clone(),
            description: None,
            artifact: None,
            manifest_gated: new.manifest_gated.clone(),
            approval_policy: new.approval_policy.clone(),
            secrets: new.secrets.clone(),
            limits: new.limits.clone(),
            outbound: new.outbound.clone(),
            end_users: new.end_users.clone(),
            end_user_approvals: new.end_user_approvals.clone(),
            llm_budget: new.llm_budget,
        };
        tx.put_deployment(&record, true)?;
        Ok(record)
    }
}

fn deployment_of(tx: &mut dyn WriteTx, id: Uuid) -> Result<DeploymentRecord, StoreError> {
    tx.deployment(id)?
        .ok_or_else(|| StoreError::not_found(Missing::Deployment, id))
}

fn update_deployment(
    tx: &mut dyn WriteTx,
    id: Uuid,
    change: impl FnOnce(&mut DeploymentRecord),
) -> Result<DeploymentRecord, StoreError> {
    let mut record = deployment_of(tx, id)?;
    change(&mut record);
    tx.put_deployment(&record, false)?;
    Ok(record)
}

/// Records a recompiled artifact of a deployment.
pub(in crate::store) struct SetArtifact(pub Uuid, pub Artifact);

impl Op for SetArtifact {
    type Output = ();

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<(), StoreError> {
        let artifact = self.1.clone();
        update_deployment(batch.tx, self.0, |d| d.artifact = Some(artifact)).map(|_| ())
    }
}

/// A build's result: `failed` with its message, or built; a successful
/// build becomes current unless a higher version already is (then it is
/// `retired`), in one commit with the retirement of the one it replaces.
pub(in crate::store) struct FinishBuild(pub Uuid, pub BuildOutcome);

impl Op for FinishBuild {
    type Output = DeploymentRecord;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<DeploymentRecord, StoreError> {
        let (id, tx) = (self.0, &mut *batch.tx);
        let record = deployment_of(tx, id)?;
        if record.status != DeploymentStatus::Building {
            return Err(StoreError::Conflict(format!(
                "deployment {id} is not building"
            )));
        }
        let now = now_rfc3339();
        let finished = match self.1.clone() {
            BuildOutcome::Failed(error) => update_deployment(tx, id, |d| {
                d.status = DeploymentStatus::Failed;
                d.error = Some(error);
                d.finished_at = Some(now);
            }),
            BuildOutcome::Succeeded {
                description,
                artifact,
            } => {
                let mut app = app_of(tx, &record)?;
                let current = match app.current_deployment {
                    Some(current) => tx.deployment(current)?,
                    None => None,
                };
                // The newest successful deployment is current: a slow older build
                // finishing after a newer one never goes live.
                let becomes_current = current.as_ref().is_none_or(|c| c.version < record.version);
                if becomes_current {
                    if let Some(previous) = current {
                        update_deployment(tx, previous.id, |d| {
                            d.status = DeploymentStatus::Retired
                        })?;
                    }
                    app.current_deployment = Some(id);
                    tx.put_app(&app, false)?;
                }
                update_deployment(tx, id, |d| {
                    d.status = if becomes_current {
                        DeploymentStatus::Active
                    } else {
                        DeploymentStatus::Retired
                    };
                    // Tools the agent's code leaves to the session's end user.
                    for tool in approved_by_end_user(&description) {
                        if !d.end_user_approvals.contains(&tool) {
                            d.end_user_approvals.push(tool);
                        }
                    }
                    d.end_user_approvals.sort();
                    d.description = Some(description);
                    d.artifact = Some(artifact);
                    d.finished_at = Some(now);
                })
            }
        }?;
        (batch.changes.hooks).push(Hook::Deployment(Box::new(finished.clone())));
        Ok(finished)
    }
}

fn app_of(tx: &mut dyn WriteTx, record: &DeploymentRecord) -> Result<AppRecord, StoreError> {
    tx.app_for_update(&record.app_id.to_string())?
        .ok_or_else(|| corrupt(format!("app {} is missing", record.app_id)))
}

/// Makes a built deployment current: rollback to an older one or
/// re-activation of a retired one. The one it replaces is retired.
pub(in crate::store) struct Activate(pub Uuid);

impl Op for Activate {
    type Output = DeploymentRecord;

    fn apply(&mut self, batch: &mut Batch<'_>) -> Result<DeploymentRecord, StoreError> {
        let (id, tx) = (self.0, &mut *batch.tx);
        let record = deployment_of(tx, id)?;
        let state = match record.status {
            DeploymentStatus::Building => Some("still building"),
            DeploymentStatus::Failed => Some("a failed build"),
            DeploymentStatus::Active | DeploymentStatus::Retired => None,
        };
        if let Some(state) = state {
            return Err(StoreError::Conflict(format!(
                "deployment {id} is {state}: only a deployment that built successfully can be activated"
            )));
        }
        let mut app = app_of(tx, &record)?;
        if app.current_deployment == Some(id) {
            return Ok(record);
        }
        if let Some(previous) = app.current_deployment {
            update_deployment(tx, previous, |d| d.status = DeploymentStatus::Retired)?;
        }
        app.current_deployment = Some(id);
        tx.put_app(&app, false)?;
        update_deployment(tx, id, |d| d.status = DeploymentStatus::Active)
    }
}

impl Remembered for CreateDeployment {
    const COMMAND: &'static str = "create_deployment";
    type Answer = DeploymentAnswer;

    fn answer(
        batch: &mut Batch<'_>,
        deployment: &DeploymentRecord,
    ) -> Result<DeploymentAnswer, StoreError> {
        let app = (batch.tx.app(&deployment.app_id.to_string())?)
            .ok_or_else(|| corrupt(format!("app {} is missing", deployment.app_id)))?;
        Ok(DeploymentAnswer {
            deployment: deployment.clone(),
            app,
        })
    }
}

/// The keyword of a tool's parameters schema by which the agent's code
/// (each SDK's end-user approval) says the session's end user may decide
/// its calls, as the manifest's `[tools.<name>] approver = "end_user"`
/// does: `"x-agenthost-approver": "end_user"` at the schema's top level.
/// (JSON Schema ignores keywords it does not know; `tool-spec` stays as it is.)
pub(crate) const APPROVER_KEYWORD: &str = "x-agenthost-approver";

/// The tools of `description` whose code leaves their calls to the
/// session's end user.
pub(crate) fn approved_by_end_user(
    description: &crate::store::records::AgentDescription,
) -> Vec<String> {
    (description.tools.iter())
        .filter(|tool| {
            tool.parameters
                .get(APPROVER_KEYWORD)
                .and_then(|v| v.as_str())
                == Some("end_user")
        })
        .map(|tool| tool.name.clone())
        .collect()
}

/// The current deployment of app `app` (none before its first build):
/// whose `[end_users]` policy says what callers may do in the app's
/// sessions, read inside the command's transaction.
pub(super) fn current_deployment(
    batch: &mut Batch<'_>,
    app: Uuid,
) -> Result<Option<crate::store::records::DeploymentRecord>, StoreError> {
    let Some(app) = batch.tx.app(&app.to_string())? else {
        return Ok(None);
    };
    match app.current_deployment {
        Some(id) => batch.tx.deployment(id),
        None => Ok(None),
    }
}
