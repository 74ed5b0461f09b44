//! Domain types. They validate themselves at construction, so the store and the handlers
//! only ever see values within the limits that docs/api.md states.

mod agent;
mod agent_config;
mod api_key;
mod checkpoint;
mod compaction;
mod field;
mod idempotency;
mod item;
mod item_ids;
pub mod mcp_items;
mod mcp_tool;
mod metadata;
mod outbound;
mod owner;
mod page;
mod retention;
mod revision;
mod run;
mod run_answer;
mod run_event;
pub mod run_items;
mod run_record;
mod session;
mod state;
mod tool;
mod webhook;
mod whole_number;

pub use agent::{Agent, AgentPatch};
pub use agent_config::{
    check_model_name, AgentConfig, CompactionPolicy, ConfigError, ContextConfig, ContextStrategy,
    ToolLoop,
};
pub use api_key::{check_scopes, check_tenant, ApiKey, KeyHash, NewKey, Scope, TENANT_PATTERN};
pub use checkpoint::{
    check_name, ChannelBlob, Checkpoint, CheckpointFilter, CheckpointName, CheckpointPath,
    NewCheckpoint, PendingWrite, TypedValue,
};
pub use compaction::{
    Compaction, ForkPoint, NewFork, DEFAULT_KEEP_RECENT_ITEMS, MAX_KEEP_RECENT_ITEMS,
};
pub use field::{json_error_message, Identifier, InvalidField, IDENTIFIER_PATTERN};
pub use idempotency::IdempotencyKey;
pub use item::{Item, ItemBody};
pub use item_ids::{turn_item_id, turn_item_ids, TurnPart};
pub use mcp_tool::{AllowedTools, ApprovalMode, McpApproval, McpTool, ToolNames};
pub use metadata::{Metadata, MetadataPatch};
pub use outbound::{WebhookPolicy, REDACTED};
pub use owner::{OwnerDocument, OwnerId, Owners};
pub use page::{Cursor, Order, Page, PageRequest};
pub use retention::{Anchor, ExpiresAfter, MAX_EXPIRES_AFTER_SECS};
pub use revision::{entity_tag, IfMatch};
pub use run::{
    IfBusy, IncompleteDetails, RequiredAction, RequiredActionKind, RequiredToolCall, Run, RunError,
    RunStatus, StopAction,
};
pub use run_answer::{Answered, Approval, RunAnswer, ToolOutput};
pub use run_event::{
    CompactionCreated, ItemCreated, MessageDelta, RunEvent, RunEventKind, UnknownEvent,
};
pub use run_record::{NewRun, RunConfig, RunRecord, Sampling, Steer};
pub use session::{
    AgentId, ForkedFrom, NewSession, Session, SessionFilter, SessionId, SessionPatch, Usage,
    DEFAULT_TENANT,
};
pub use state::{StateChange, StateChanges, StateDocument, StateTooLarge, StateWrite};
pub use tool::{FunctionTool, RequireApproval, Tool, Webhook};
pub use webhook::{CompletionWebhook, DeliveryStatus, WebhookDelivery};
pub(crate) use whole_number::{
    optional as whole_optional, patch as whole_patch, required as whole_required,
};
