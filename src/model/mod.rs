//! Domain types. They validate themselves at construction, so the store and the handlers
//! only ever see values that satisfy DESIGN.md's limits.

mod agent;
mod field;
mod idempotency;
mod item;
mod metadata;
mod page;
mod run;
mod session;
mod whole;

pub use agent::{
    Agent, AgentConfig, AgentPatch, ConfigError, ContextConfig, ContextStrategy, Tool, ToolKind,
    Webhook, WebhookPolicy, DEFAULT_MAX_TURNS,
};
pub use field::{InvalidField, IDENTIFIER_PATTERN};
pub use idempotency::IdempotencyKey;
pub use item::{Item, ItemBody};
pub use metadata::{Metadata, MetadataPatch};
pub use page::{Cursor, Order, Page, PageRequest};
pub use run::items as run_items;
pub use run::{
    IfBusy, ItemCreated, MessageDelta, NewRun, RequiredAction, RequiredToolCall, Run, RunConfig,
    RunError, RunEvent, RunRecord, RunStatus, ToolOutput,
};
pub use session::{AgentId, NewSession, Session, SessionId, SessionPatch, Usage, DEFAULT_TENANT};
pub(crate) use whole::{optional as whole_optional, patch as whole_patch};
