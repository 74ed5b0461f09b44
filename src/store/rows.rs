//! Rows as both backends return them, and the SQL fragments of sessions they share.
//! Reading a page of rows is in `pages`.

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use sqlx::types::Json;
use uuid::Uuid;

use super::payload::{Column, PayloadCodec};
use super::timestamp::Timestamp;
use super::StoreError;
use crate::model::{
    Agent, Anchor, ApiKey, Compaction, ExpiresAfter, ForkedFrom, Item, ItemBody, Metadata, Scope,
    Session, Usage,
};

/// The statuses of a session's unfinished runs, as an SQL list.
pub(super) const UNFINISHED: &str = "('queued', 'running', 'requires_action')";

pub(super) const SESSION_COLUMNS: &str =
    "id, created_at, updated_at, metadata, agent_id, item_count, \
     input_tokens, output_tokens, total_tokens, llm_calls, \
     forked_from_session_id, forked_from_item_id, \
     last_active_at, expires_anchor, expires_seconds, expires_at, revision, app_id, user_id";
pub(super) const ITEM_COLUMNS: &str = "id, seq, created_at, run_id, body";

#[derive(sqlx::FromRow)]
pub(super) struct SessionRow {
    /// Read only where a statement returns it too.
    #[sqlx(default)]
    pub pk: Option<i64>,
    id: String,
    created_at: Timestamp,
    updated_at: Timestamp,
    metadata: Json<Metadata>,
    agent_id: Option<String>,
    item_count: i64,
    input_tokens: i64,
    output_tokens: i64,
    total_tokens: i64,
    llm_calls: i64,
    forked_from_session_id: Option<String>,
    forked_from_item_id: Option<Uuid>,
    last_active_at: Timestamp,
    expires_anchor: Option<String>,
    expires_seconds: Option<i64>,
    expires_at: Option<Timestamp>,
    revision: i64,
    app_id: Option<String>,
    user_id: Option<String>,
}

impl From<SessionRow> for Session {
    fn from(row: SessionRow) -> Self {
        Session {
            id: row.id,
            created_at: row.created_at.0,
            updated_at: row.updated_at.0,
            metadata: row.metadata.0,
            agent_id: row.agent_id,
            app_id: row.app_id,
            user_id: row.user_id,
            item_count: row.item_count,
            forked_from: row
                .forked_from_session_id
                .map(|session_id| ForkedFrom { session_id, item_id: row.forked_from_item_id }),
            usage: Usage {
                input_tokens: row.input_tokens,
                output_tokens: row.output_tokens,
                total_tokens: row.total_tokens,
                llm_calls: row.llm_calls,
            },
            last_active_at: row.last_active_at.0,
            expires_after: stored_expiry(row.expires_anchor.as_deref(), row.expires_seconds),
            expires_at: row.expires_at.map(|at| at.0),
            revision: row.revision,
        }
    }
}

/// A session's retention from its columns; none unless both are set.
pub(super) fn stored_expiry(anchor: Option<&str>, seconds: Option<i64>) -> Option<ExpiresAfter> {
    Some(ExpiresAfter { anchor: Anchor::parse(anchor?)?, seconds: u64::try_from(seconds?).ok()? })
}

/// The SQL condition that the session row `alias` has not expired, `now` being the
/// backend's SQL for the current time. A session with an unfinished run lives on until
/// the run ends.
pub(super) fn live(alias: &str, now: &str) -> String {
    format!(
        "({alias}.expires_at is null or {alias}.expires_at > {now} or exists (\
         select 1 from runs live_run where live_run.session_pk = {alias}.pk \
         and live_run.status in {UNFINISHED}))"
    )
}

/// The columns of a session's retention: its anchor, seconds and expiry time, which
/// statements always bind together (with `bind_expiry`).
#[derive(Clone, Copy)]
pub(super) struct ExpiryColumns {
    pub anchor: Option<&'static str>,
    pub seconds: Option<i64>,
    pub expires_at: Option<Timestamp>,
}

/// The retention columns of a session made at `created_at` and last active at
/// `last_active_at`.
pub(super) fn expiry_columns(
    expiry: Option<ExpiresAfter>, created_at: Timestamp, last_active_at: Timestamp,
) -> ExpiryColumns {
    match expiry {
        Some(e) => ExpiryColumns {
            anchor: Some(e.anchor.as_str()),
            seconds: Some(e.seconds as i64),
            expires_at: Some(Timestamp(e.expires_at(created_at.0, last_active_at.0))),
        },
        None => ExpiryColumns { anchor: None, seconds: None, expires_at: None },
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct ItemRow {
    id: Uuid,
    seq: i64,
    created_at: Timestamp,
    run_id: Option<Uuid>,
    pub body: String,
    /// The session's revision, where a page's statement reads it with the items.
    #[sqlx(default)]
    pub revision: Option<i64>,
}

impl ItemRow {
    /// The item, its payload opened.
    pub(super) fn into_item(self, codec: &PayloadCodec, tenant: &str) -> Result<Item, StoreError> {
        let body = codec.open(tenant, Column::ItemBody, self.body)?;
        let item = RawValue::from_string(body)
            .map_err(|e| StoreError::Corrupt(format!("item {} is not JSON: {e}", self.id)))?;
        Ok(Item {
            id: self.id,
            seq: self.seq,
            created_at: self.created_at.0,
            run_id: self.run_id,
            item,
        })
    }
}

/// A session's history mark and, where its statement found one, an item after a seq.
#[derive(sqlx::FromRow)]
pub(super) struct MarkedItemRow {
    pub session_pk: i64,
    pub session_created_at: Timestamp,
    pub rewrites: i64,
    id: Option<Uuid>,
    seq: Option<i64>,
    created_at: Option<Timestamp>,
    run_id: Option<Uuid>,
    body: Option<String>,
}

impl MarkedItemRow {
    /// The item the row holds, if it holds one.
    pub(super) fn item_row(self) -> Option<ItemRow> {
        Some(ItemRow {
            id: self.id?,
            seq: self.seq?,
            created_at: self.created_at?,
            run_id: self.run_id,
            body: self.body?,
            revision: None,
        })
    }
}

/// Items from their rows, their payloads opened.
pub(super) fn open_items(
    codec: &PayloadCodec, tenant: &str, rows: Vec<ItemRow>,
) -> Result<Vec<Item>, StoreError> {
    rows.into_iter().map(|row| row.into_item(codec, tenant)).collect()
}

/// The first 24 hex digits of the UUIDv7s of rows that the database copies: a fresh
/// UUIDv7's millisecond time, version, and 42 of its random bits. Each copy appends its
/// rank in 8 hex digits (RFC 9562's counter method), so one statement's ids are unique
/// and ascending, and insert at the end of the index rather than all over it.
pub(super) fn id_prefix() -> String {
    let mut hex = Uuid::now_v7().simple().to_string();
    hex.truncate(24);
    hex
}

/// The items of an append whose seqs end at `last_seq`, ready to be inserted.
pub(super) fn new_items(bodies: &[ItemBody], last_seq: i64, now: DateTime<Utc>) -> Vec<Item> {
    let first_seq = last_seq - bodies.len() as i64 + 1;
    bodies
        .iter()
        .zip(first_seq..)
        .map(|(body, seq)| Item {
            id: Uuid::now_v7(),
            seq,
            created_at: now,
            run_id: None,
            item: body.to_raw(),
        })
        .collect()
}

pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Corrupt(format!("cannot encode: {e}")))
}

pub(super) const COMPACTION_COLUMNS: &str =
    "id, created_at, run_id, through_item_id, through_seq, items_compacted, model, \
     input_tokens, output_tokens, total_tokens, llm_calls, summary";

#[derive(sqlx::FromRow)]
pub(super) struct CompactionRow {
    id: Uuid,
    created_at: Timestamp,
    run_id: Option<Uuid>,
    through_item_id: Uuid,
    through_seq: i64,
    items_compacted: i64,
    model: String,
    input_tokens: i64,
    output_tokens: i64,
    total_tokens: i64,
    llm_calls: i64,
    summary: String,
}

impl CompactionRow {
    /// The compaction of `session_id`, its summary opened.
    pub(super) fn into_compaction(
        self, codec: &PayloadCodec, tenant: &str, session_id: &str,
    ) -> Result<Compaction, StoreError> {
        Ok(Compaction {
            id: self.id,
            session_id: session_id.to_owned(),
            created_at: self.created_at.0,
            run_id: self.run_id,
            through_item_id: self.through_item_id,
            through_seq: self.through_seq,
            items_compacted: self.items_compacted,
            summary: codec.open(tenant, Column::CompactionSummary, self.summary)?,
            model: self.model,
            usage: Usage {
                input_tokens: self.input_tokens,
                output_tokens: self.output_tokens,
                total_tokens: self.total_tokens,
                llm_calls: self.llm_calls,
            },
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct AgentRow {
    body: String,
}

impl AgentRow {
    pub(super) fn open(self, codec: &PayloadCodec, tenant: &str) -> Result<Agent, StoreError> {
        let body = codec.open(tenant, Column::AgentBody, self.body)?;
        serde_json::from_str(&body).map_err(|e| StoreError::Corrupt(format!("agent: {e}")))
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct ApiKeyRow {
    id: Uuid,
    tenant_id: String,
    name: String,
    prefix: String,
    scopes: String,
    created_at: Timestamp,
    expires_at: Option<Timestamp>,
    last_used_at: Option<Timestamp>,
}

impl TryFrom<ApiKeyRow> for ApiKey {
    type Error = StoreError;

    fn try_from(row: ApiKeyRow) -> Result<Self, StoreError> {
        let scopes = row
            .scopes
            .split(' ')
            .map(|scope| match scope {
                "read" => Ok(Scope::Read),
                "write" => Ok(Scope::Write),
                other => Err(StoreError::Corrupt(format!("API key scope `{other}`"))),
            })
            .collect::<Result<_, _>>()?;
        Ok(ApiKey {
            id: row.id,
            tenant: row.tenant_id,
            name: row.name,
            prefix: row.prefix,
            scopes,
            created_at: row.created_at.0,
            expires_at: row.expires_at.map(|t| t.0),
            last_used_at: row.last_used_at.map(|t| t.0),
        })
    }
}

/// Scopes as the `scopes` column keeps them.
pub(super) fn scopes_text(scopes: &[Scope]) -> String {
    let names: Vec<&str> = scopes
        .iter()
        .map(|scope| match scope {
            Scope::Read => "read",
            Scope::Write => "write",
        })
        .collect();
    names.join(" ")
}
