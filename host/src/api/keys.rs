//! `POST /api-keys` (the secret is shown once), `GET /api-keys` (never the
//! secret), `DELETE /api-keys/{id}` (revokes at once, ends the key's streams).

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::extract::{Json, Path};
use super::{ApiError, AppState};
use crate::keys::mint;
use crate::store::{ApiKeyRecord, KeyClass};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    class: KeyClass,
    name: String,
    /// The app (slug or id) of an invocation key.
    #[serde(default)]
    app: Option<String>,
}

fn view(record: &ApiKeyRecord) -> Value {
    json!({
        "id": record.id,
        "name": record.name,
        "class": record.class,
        "app_id": record.app_id,
        "prefix": record.prefix,
        "created_at": record.created_at,
        "last_used_at": record.last_used_at,
    })
}

pub async fn create(
    State(state): State<AppState>,
    Json(body): Json<CreateKey>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let name = body.name.trim().to_string();
    if name.is_empty() || name.len() > 100 {
        return Err(ApiError::unprocessable(
            "invalid_body",
            "`name` must be 1 to 100 bytes of text",
        ));
    }
    let app_id = match (body.class, body.app) {
        (KeyClass::Platform, None) => None,
        (KeyClass::Platform, Some(_)) => {
            return Err(ApiError::unprocessable(
                "invalid_body",
                "a platform key is organisation-wide: leave `app` out",
            ));
        }
        (KeyClass::Invocation, None) => {
            return Err(ApiError::unprocessable(
                "invalid_body",
                "an invocation key is for one app: name it in `app`",
            ));
        }
        (KeyClass::Invocation, Some(app)) => {
            let key = app.clone();
            let found = state.store.read(move |s| s.app(&key)).await?;
            Some(
                found
                    .ok_or_else(|| {
                        ApiError::not_found("app_not_found", format!("app `{app}` not found"))
                    })?
                    .id,
            )
        }
    };
    let minted = mint(body.class, &name, app_id);
    state.writer.put_api_key(minted.record.clone()).await?;
    state.keys.insert(&minted.record);
    let mut out = view(&minted.record);
    out["key"] = json!(minted.secret);
    Ok((StatusCode::CREATED, Json(out)))
}

pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<Value>>, ApiError> {
    let records = state.store.read(|s| s.api_keys()).await?;
    Ok(Json(records.iter().map(view).collect()))
}

pub async fn revoke(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.writer.delete_api_key(id.clone()).await?;
    state.keys.remove(&id);
    Ok(StatusCode::NO_CONTENT)
}
