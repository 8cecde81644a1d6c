//! The writer's deployment commands: versions, build results, the current deployment.

use redb::{ReadableTable, WriteTransaction};
use uuid::Uuid;

use super::commands::{BuildOutcome, NewDeployment};
use super::error::{corrupt, storage};
use super::records::{AppRecord, DeploymentRecord, DeploymentStatus};
use super::txn::{find_app, get_json, put_json};
use super::{StoreError, now_rfc3339, tables};

pub(super) fn create_deployment(
    txn: &WriteTransaction,
    new: NewDeployment,
) -> Result<DeploymentRecord, StoreError> {
    let now = now_rfc3339();
    let app = match find_app(txn, &new.app_slug)? {
        Some(app) => app,
        None => {
            let app = AppRecord {
                id: Uuid::now_v7(),
                slug: new.app_slug.clone(),
                created_at: now.clone(),
                current_deployment: None,
            };
            put_json(txn, tables::APPS, app.id.as_u128(), &app)?;
            let mut slugs = txn.open_table(tables::APP_SLUGS).map_err(storage)?;
            slugs
                .insert(app.slug.as_str(), app.id.as_u128())
                .map_err(storage)?;
            app
        }
    };
    let key = app.id.as_u128();
    let mut index = txn.open_table(tables::APP_DEPLOYMENTS).map_err(storage)?;
    let version = match new.version {
        Some(0) => return Err(StoreError::Rejected("version must be 1 or more".into())),
        Some(v) => {
            if index.get((key, v)).map_err(storage)?.is_some() {
                return Err(StoreError::Rejected(format!(
                    "version {v} of app `{}` already exists",
                    app.slug
                )));
            }
            v
        }
        None => match index
            .range((key, 0)..=(key, u64::MAX))
            .map_err(storage)?
            .next_back()
        {
            Some(row) => row.map_err(storage)?.0.value().1 + 1,
            None => 1,
        },
    };
    let record = DeploymentRecord {
        id: Uuid::now_v7(),
        app_id: app.id,
        version,
        status: DeploymentStatus::Building,
        created_at: now,
        finished_at: None,
        error: None,
        manifest: new.manifest,
        entry: new.entry,
        description: None,
        artifact: None,
        manifest_gated: new.manifest_gated,
        approval_policy: new.approval_policy,
        secrets: new.secrets,
        limits: new.limits,
        outbound: new.outbound,
    };
    index
        .insert((key, version), record.id.as_u128())
        .map_err(storage)?;
    drop(index);
    put_json(txn, tables::DEPLOYMENTS, record.id.as_u128(), &record)?;
    Ok(record)
}

pub(super) fn update_deployment(
    txn: &WriteTransaction,
    id: Uuid,
    change: impl FnOnce(&mut DeploymentRecord) -> Result<(), StoreError>,
) -> Result<DeploymentRecord, StoreError> {
    let mut record: DeploymentRecord = get_json(txn, tables::DEPLOYMENTS, id)?
        .ok_or_else(|| StoreError::not_found("deployment", id))?;
    change(&mut record)?;
    put_json(txn, tables::DEPLOYMENTS, id.as_u128(), &record)?;
    Ok(record)
}

pub(super) fn finish_build(
    txn: &WriteTransaction,
    id: Uuid,
    outcome: BuildOutcome,
) -> Result<DeploymentRecord, StoreError> {
    let record: DeploymentRecord = get_json(txn, tables::DEPLOYMENTS, id)?
        .ok_or_else(|| StoreError::not_found("deployment", id))?;
    if record.status != DeploymentStatus::Building {
        return Err(StoreError::Conflict(format!(
            "deployment {id} is not building"
        )));
    }
    let now = now_rfc3339();
    match outcome {
        BuildOutcome::Failed(error) => update_deployment(txn, id, |d| {
            d.status = DeploymentStatus::Failed;
            d.error = Some(error);
            d.finished_at = Some(now);
            Ok(())
        }),
        BuildOutcome::Succeeded {
            description,
            artifact,
        } => {
            let mut app: AppRecord = get_json(txn, tables::APPS, record.app_id)?
                .ok_or_else(|| corrupt(format!("app {} is missing", record.app_id)))?;
            let current = match app.current_deployment {
                Some(current) => get_json::<DeploymentRecord>(txn, tables::DEPLOYMENTS, current)?,
                None => None,
            };
            // The newest successful deployment is current: a slow older build
            // finishing after a newer one never goes live.
            let becomes_current = current.as_ref().is_none_or(|c| c.version < record.version);
            if becomes_current {
                if let Some(previous) = current {
                    update_deployment(txn, previous.id, |d| {
                        d.status = DeploymentStatus::Retired;
                        Ok(())
                    })?;
                }
                app.current_deployment = Some(id);
                put_json(txn, tables::APPS, app.id.as_u128(), &app)?;
            }
            update_deployment(txn, id, |d| {
                d.status = if becomes_current {
                    DeploymentStatus::Active
                } else {
                    DeploymentStatus::Retired
                };
                d.description = Some(description);
                d.artifact = Some(artifact);
                d.finished_at = Some(now);
                Ok(())
            })
        }
    }
}

/// Makes a built deployment current: rollback to an older one or
/// re-activation of a retired one. The one it replaces is retired.
pub(super) fn activate(txn: &WriteTransaction, id: Uuid) -> Result<DeploymentRecord, StoreError> {
    let record: DeploymentRecord = get_json(txn, tables::DEPLOYMENTS, id)?
        .ok_or_else(|| StoreError::not_found("deployment", id))?;
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
    let mut app: AppRecord = get_json(txn, tables::APPS, record.app_id)?
        .ok_or_else(|| corrupt(format!("app {} is missing", record.app_id)))?;
    if app.current_deployment == Some(id) {
        return Ok(record);
    }
    if let Some(previous) = app.current_deployment {
        update_deployment(txn, previous, |d| {
            d.status = DeploymentStatus::Retired;
            Ok(())
        })?;
    }
    app.current_deployment = Some(id);
    put_json(txn, tables::APPS, app.id.as_u128(), &app)?;
    update_deployment(txn, id, |d| {
        d.status = DeploymentStatus::Active;
        Ok(())
    })
}
