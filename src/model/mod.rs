//! Domain types. They validate themselves at construction, so the store and the handlers
//! only ever see values that satisfy DESIGN.md's limits.

mod field;
mod idempotency;
mod item;
mod metadata;
mod page;
mod session;

pub use field::{InvalidField, IDENTIFIER_PATTERN};
pub use idempotency::IdempotencyKey;
pub use item::{Item, ItemBody};
pub use metadata::{Metadata, MetadataPatch};
pub use page::{Cursor, Order, Page, PageRequest};
pub use session::{AgentId, NewSession, Session, SessionId, SessionPatch, Usage, DEFAULT_TENANT};
