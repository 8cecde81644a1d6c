//! `GET /apps` and `GET /apps/{id}` (by id or slug, with its routes and tools).

use axum::extract::State;

use super::extract::{Json, Path};
use super::views::AppView;
use super::{ApiError, AppState};
use crate::api::ErrorCode;

pub(super) async fn list(State(state): State<AppState>) -> Result<Json<Vec<AppView>>, ApiError> {
    let apps = state
        .store
        .read(|s| {
            let mut out = Vec::new();
            for app in s.apps()? {
                let current = match app.current_deployment {
                    Some(id) => s.deployment(id)?,
                    None => None,
                };
                out.push(AppView::new(&app, current.as_ref()));
            }
            Ok(out)
        })
        .await?;
    Ok(Json(apps))
}

pub(super) async fn get(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<AppView>, ApiError> {
    let key = id.clone();
    let found = state
        .store
        .read(move |s| {
            let Some(app) = s.app(&key)? else {
                return Ok(None);
            };
            let current = match app.current_deployment {
                Some(id) => s.deployment(id)?,
                None => None,
            };
            Ok(Some(AppView::new(&app, current.as_ref())))
        })
        .await?;
    found
        .map(Json)
        .ok_or_else(|| ApiError::new(ErrorCode::AppNotFound, format!("app `{id}` not found")))
}
