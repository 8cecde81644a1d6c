//! `By`: who a command acts for, resolved once by the API from its caller
//! (`api::caller`) and carried as a field of every command that starts a
//! turn or writes on someone's behalf. The domain derives from it what the
//! caller may do, against the app's current deployment read in the
//! command's own transaction (so a deployment activated after an edge's
//! check cannot change the answer; a new session pins it): whether a bare
//! invocation key may still act (`[end_users] required`), whether an end
//! user may schedule, the owner a new session records, whose share of turns
//! a turn counts against, and whether the app's public caps apply.

use serde_json::{Map, Value};

use crate::journal::payloads::EndUserInfo;
use crate::store::StoreError;
use crate::store::records::{DeploymentRecord, EndUsersRecord, ScheduleCreator};

/// Who a command acts for.
#[derive(Debug, Clone, PartialEq)]
pub enum By {
    /// The host itself (`name` is recorded as its key id): an approval's
    /// deadline.
    Host { name: &'static str },
    /// A schedule firing, made by `creator`: an end user's fires under the
    /// app's public caps, as their input would (counted when it was set).
    Schedule { creator: ScheduleCreator },
    /// A platform key (the operator, the app's backend).
    Platform { key_id: String },
    /// An app's invocation key with no end user behind it (the key a
    /// frontend ships); `source` is the request's client address (an IPv6
    /// address by its /64), whose share of the app's frontend caps its
    /// sessions and turns count against (`quotas::check`).
    AppKey {
        key_id: String,
        source: Option<String>,
    },
    /// An end user, by their token: `user` is their id in the app, `claims`
    /// all their token's claims (the deployment's policy picks which a
    /// session records).
    EndUser {
        key_id: String,
        user: String,
        claims: Map<String, Value>,
    },
}

/// A refusal of the app's `[end_users]` policy, decided in the writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyRefusal {
    /// A bare invocation key where `[end_users] required = true` (401).
    TokenRequired,
    /// An end user's schedule where `[end_users] schedules` is not set (403).
    SchedulesNotAllowed,
    /// An end user's `cron` schedule (403).
    CronNotAllowed,
}

impl PolicyRefusal {
    /// The message a client reads.
    pub fn message(self) -> &'static str {
        match self {
            PolicyRefusal::TokenRequired => {
                "this app's sessions need an end-user token (`[end_users] required = true`): send \
                 `Authorization: Bearer <end-user token>` instead of the invocation key"
            }
            PolicyRefusal::SchedulesNotAllowed => {
                "this app does not let its end users schedule (its manifest's `[end_users] \
                 schedules = true` would); a platform key may"
            }
            PolicyRefusal::CronNotAllowed => {
                "an end user sets one-shot schedules only (`at`): a recurring `cron` schedule is \
                 the app backend's to set, with a platform key"
            }
        }
    }
}

impl By {
    /// The host itself, unnamed.
    pub fn host() -> By {
        By::Host { name: "host" }
    }

    /// The id of the key that acted (the host's `name` for the host itself).
    pub fn key_id(&self) -> &str {
        match self {
            By::Host { name } => name,
            By::Schedule { .. } => "schedule",
            By::Platform { key_id } | By::AppKey { key_id, .. } | By::EndUser { key_id, .. } => {
                key_id
            }
        }
    }

    /// An invocation key or an end user: the app's public caps apply
    /// (`quotas::check`).
    pub(in crate::store) fn public(&self) -> bool {
        match self {
            By::AppKey { .. } | By::EndUser { .. } => true,
            By::Schedule { creator } => *creator == ScheduleCreator::EndUser,
            By::Host { .. } | By::Platform { .. } => false,
        }
    }

    /// A platform key or the host: no end-user policy applies.
    pub(in crate::store) fn is_operator(&self) -> bool {
        matches!(
            self,
            By::Host { .. } | By::Platform { .. } | By::Schedule { .. }
        )
    }

    /// The source address a session created by this caller records: a
    /// bare invocation key's (`SessionRecord::source`).
    pub(in crate::store) fn source(&self) -> Option<String> {
        match self {
            By::AppKey { source, .. } => source.clone(),
            _ => None,
        }
    }

    /// The end user's id, for an end user.
    pub fn user(&self) -> Option<&str> {
        match self {
            By::EndUser { user, .. } => Some(user),
            _ => None,
        }
    }

    /// 401 for a bare invocation key where `deployment` requires end-user
    /// tokens (`[end_users] required`).
    pub(in crate::store) fn may_act(
        &self,
        deployment: &DeploymentRecord,
    ) -> Result<(), StoreError> {
        let required = policy(deployment).is_some_and(|p| p.required);
        if matches!(self, By::AppKey { .. }) && required {
            return Err(StoreError::Policy(PolicyRefusal::TokenRequired));
        }
        Ok(())
    }

    /// What a session created by this caller records as its owner: the
    /// end user and the claims `deployment`'s policy lets through.
    pub(in crate::store) fn owner(&self, deployment: &DeploymentRecord) -> Option<EndUserInfo> {
        let By::EndUser { user, claims, .. } = self else {
            return None;
        };
        let allowed = policy(deployment)
            .map(|p| p.claims.as_slice())
            .unwrap_or_default();
        let claims = (claims.iter())
            .filter(|(name, _)| allowed.contains(name))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        Some(EndUserInfo {
            id: user.clone(),
            claims,
        })
    }

    /// Who a schedule this caller sets was made by; for an end user, 403
    /// unless `deployment` lets end users schedule, and for a `cron` one.
    pub(in crate::store) fn schedule_creator(
        &self,
        deployment: &DeploymentRecord,
        cron: bool,
    ) -> Result<ScheduleCreator, StoreError> {
        if !matches!(self, By::EndUser { .. }) {
            return Ok(ScheduleCreator::Platform);
        }
        if !policy(deployment).is_some_and(|p| p.schedules) {
            return Err(StoreError::Policy(PolicyRefusal::SchedulesNotAllowed));
        }
        if cron {
            return Err(StoreError::Policy(PolicyRefusal::CronNotAllowed));
        }
        Ok(ScheduleCreator::EndUser)
    }
}

fn policy(deployment: &DeploymentRecord) -> Option<&EndUsersRecord> {
    deployment.end_users.as_ref()
}
