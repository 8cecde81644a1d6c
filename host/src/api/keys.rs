//! `POST /api-keys` (the secret is shown once), `GET /api-keys` (never the
//! secret), `DELETE /api-keys/{id}` (revokes at once, ends the key's streams).

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{AdditionalProperties, ObjectBuilder, OneOfBuilder, Schema, Type};

use super::extract::{Json, Path};
use super::views::{ApiKeyView, MintedKey};
use super::{ApiError, AppState};
use crate::api::ErrorCode;
use crate::keys::mint;
use crate::store::KeyClass;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateKey {
    class: KeyClass,
    name: String,
    /// The app (slug or id) of an invocation key.
    #[serde(default)]
    app: Option<String>,
}

/// `CreateKey` as the OpenAPI document gives it: `app` is there for an
/// invocation key, and only for one (the handler checks the same).
pub(super) struct NewKey;

impl utoipa::PartialSchema for NewKey {
    fn schema() -> RefOr<Schema> {
        let variant = |class: &str| {
            let name = ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(100))
                .pattern(Some("\\S"));
            ObjectBuilder::new()
                .property(
                    "class",
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .enum_values(Some([class])),
                )
                .property("name", name)
                .required("class")
                .required("name")
                .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        };
        let app = ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some("The app's slug or id"));
        OneOfBuilder::new()
            .item(variant("platform"))
            .item(variant("invocation").property("app", app).required("app"))
            .into()
    }
}

impl utoipa::ToSchema for NewKey {}

pub(super) async fn create(
    State(state): State<AppState>,
    Json(body): Json<CreateKey>,
) -> Result<(StatusCode, Json<MintedKey>), ApiError> {
    let name = body.name.trim().to_string();
    if name.is_empty() || name.len() > 100 {
        return Err(ApiError::new(
            ErrorCode::InvalidBody,
            "`name` must be 1 to 100 bytes of text",
        ));
    }
    let app_id = match (body.class, body.app) {
        (KeyClass::Platform, None) => None,
        (KeyClass::Platform, Some(_)) => {
            return Err(ApiError::new(
                ErrorCode::InvalidBody,
                "a platform key is organisation-wide: leave `app` out",
            ));
        }
        (KeyClass::Invocation, None) => {
            return Err(ApiError::new(
                ErrorCode::InvalidBody,
                "an invocation key is for one app: name it in `app`",
            ));
        }
        (KeyClass::Invocation, Some(app)) => {
            let key = app.clone();
            let found = state.store.read(move |s| s.app(&key)).await?;
            Some(
                found
                    .ok_or_else(|| {
                        ApiError::new(ErrorCode::AppNotFound, format!("app `{app}` not found"))
                    })?
                    .id,
            )
        }
    };
    let minted = mint(body.class, &name, app_id);
    state.writer.put_api_key(minted.record.clone()).await?;
    state.keys.insert(&minted.record);
    let out = MintedKey {
        view: ApiKeyView::from(&minted.record),
        key: minted.secret,
    };
    Ok((StatusCode::CREATED, Json(out)))
}

pub(super) async fn list(State(state): State<AppState>) -> Result<Json<Vec<ApiKeyView>>, ApiError> {
    let records = state.store.read(|s| s.api_keys()).await?;
    Ok(Json(records.iter().map(ApiKeyView::from).collect()))
}

pub(super) async fn revoke(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.writer.delete_api_key(id.clone()).await?;
    state.keys.remove(&id);
    Ok(StatusCode::NO_CONTENT)
}
