//! `RuntimeError`: failures of the runtime outside a guest's own turn.

use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("deployment {0} has no compiled component")]
    NotBuilt(Uuid),
    #[error("deployment {0} not found")]
    UnknownDeployment(Uuid),
    #[error("cannot load the component: {0}")]
    Load(String),
    #[error("cannot {what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

impl RuntimeError {
    pub fn io(what: &'static str) -> impl FnOnce(std::io::Error) -> RuntimeError {
        move |source| RuntimeError::Io { what, source }
    }
}
