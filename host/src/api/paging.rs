//! Pagination and the `app` filter shared by the list endpoints.

use uuid::Uuid;

use super::ApiError;
use crate::api::ErrorCode;
use crate::store::{Db, StoreError};

const DEFAULT_PAGE: usize = 50;
const MAX_PAGE: usize = 500;

/// A page request: at most `limit` items strictly past `cursor` (the key
/// of the previous page's last item) in the list's order.
pub(super) struct Page {
    pub cursor: Option<Uuid>,
    pub limit: usize,
}

impl Page {
    pub(super) fn new(cursor: Option<&str>, limit: Option<usize>) -> Result<Page, ApiError> {
        let after = match cursor {
            None => None,
            Some(c) => Some(Uuid::parse_str(c).map_err(|_| {
                ApiError::new(
                    ErrorCode::InvalidQuery,
                    format!("`cursor` = `{c}` is not a cursor from this API"),
                )
            })?),
        };
        Ok(Page {
            cursor: after,
            limit: limit.unwrap_or(DEFAULT_PAGE).clamp(1, MAX_PAGE),
        })
    }

    /// Trims `items` (read with `limit + 1`) to the page; the next cursor if more remain.
    pub(super) fn finish<T>(
        &self,
        mut items: Vec<T>,
        id: impl Fn(&T) -> Uuid,
    ) -> (Vec<T>, Option<String>) {
        let more = items.len() > self.limit;
        items.truncate(self.limit);
        let next = more
            .then(|| items.last().map(|item| id(item).to_string()))
            .flatten();
        (items, next)
    }
}

/// The `app` filter of a list: `Ok(None)` for no filter, `Ok(Some(None))`
/// for an app that does not exist (an empty list, not an error).
pub(super) fn app_filter(
    store: &Db,
    app: Option<String>,
) -> Result<Option<Option<Uuid>>, StoreError> {
    match app {
        None => Ok(None),
        Some(app) => Ok(Some(store.app(&app)?.map(|app| app.id))),
    }
}
