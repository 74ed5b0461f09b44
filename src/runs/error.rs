use crate::model::{ConfigError, InvalidField};
use crate::store::StoreError;

/// Why a run use case failed. HTTP maps it once, naming the session and run it was about.
#[derive(Debug, thiserror::Error)]
pub enum RunsError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The run's configuration is refused: a bad field or an unsupported setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An agent the run's configuration names does not exist: `agent_id` of the request,
    /// or, with `by_session`, the session's agent.
    #[error("agent `{agent_id}` does not exist")]
    AgentNotFound { agent_id: String, by_session: bool },
    /// A compaction has no item to summarise beyond the ones it keeps.
    #[error("the session has {items} uncompacted items; keeping {keep} leaves none to summarise")]
    NothingToCompact { items: usize, keep: u32 },
    /// The summarising LLM call failed; nothing was stored.
    #[error(transparent)]
    Llm(#[from] crate::llm::LlmError),
    /// The engine went away before it could answer (a panic in its task).
    #[error("the run engine stopped before answering")]
    Stopped,
}

impl From<InvalidField> for RunsError {
    fn from(error: InvalidField) -> Self {
        Self::Config(error.into())
    }
}

pub type Result<T, E = RunsError> = std::result::Result<T, E>;
