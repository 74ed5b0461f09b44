//! What a run reads of its session before it starts, and the histories a process keeps
//! prepared between runs, so that a run reads and translates only what was appended
//! since the last one.
//!
//! A kept history is used only while the session's [`HistoryMark`] is the one it was read
//! at: a delete, pop, clear, replacement or compaction (made by any replica) changes it,
//! and the history is then read whole again. The mark and the items appended since are
//! read in one statement, so they are of one moment. The histories kept are bounded by
//! the memory they hold (`HISTORY_CACHE_MB`); the least recently used go first.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::value::RawValue;
use serde_json::Value;

use super::context::PreparedHistory;
use super::Engine;
use crate::model::{Item, Order, PageRequest, SessionId};
use crate::store::{HistoryMark, StoreError};

/// What names MCP calls as a run offers their tools.
pub(super) type Rename<'a> = dyn Fn(&mut [Value]) + Sync + 'a;

/// What a run reads of its session before it starts.
#[derive(Debug, Clone, Default)]
pub(super) struct History {
    /// The latest summary of the session's older items.
    pub summary: Option<String>,
    /// The items after the summary, oldest first: all of them, or with a token budget
    /// only the newest that could fit it (the estimate is refined when the messages are
    /// built).
    pub prepared: PreparedHistory,
    /// Of those, the MCP items: the approval requests a later run may make the approved
    /// calls of, and the calls made of them.
    pub mcp: Vec<Box<RawValue>>,
}

/// Reads the session's history, from what this process keeps of it where it can.
/// `rename` names MCP calls as the run offers their tools; a run that renames none
/// passes `None`, and only such a history is kept.
pub(super) async fn read(
    engine: &Engine, tenant: &str, session_id: &SessionId, budget: Option<u64>,
    rename: Option<&Rename<'_>>,
) -> Result<History, StoreError> {
    let histories = &engine.histories;
    if histories.capacity == 0 || rename.is_some() {
        return Ok(load(engine, tenant, session_id, budget, rename).await?.history);
    }
    let key = (tenant.to_owned(), session_id.as_str().to_owned());
    if let Some(mut kept) = histories.take(&key) {
        match engine.store.appended_since(tenant, session_id, kept.last_seq).await {
            Ok((mark, items)) if mark == kept.mark => {
                kept.add(items);
                if within(budget, kept.bytes) {
                    let history = kept.history.clone();
                    histories.keep(key, kept);
                    return Ok(history);
                }
            }
            Ok(_) => {}
            Err(StoreError::SessionNotFound) => return Ok(History::default()),
            Err(error) => return Err(error),
        }
    }
    // The mark before the read: whatever changes the history after it changes the mark.
    let mark = match engine.store.appended_since(tenant, session_id, i64::MAX).await {
        Ok((mark, _)) => mark,
        Err(StoreError::SessionNotFound) => return Ok(History::default()),
        Err(error) => return Err(error),
    };
    let loaded = load(engine, tenant, session_id, budget, None).await?;
    if loaded.whole {
        let kept =
            Kept { mark, last_seq: loaded.last_seq, bytes: loaded.bytes, history: loaded.history };
        histories.keep(key, kept.clone());
        return Ok(kept.history);
    }
    Ok(loaded.history)
}

/// Whether history of `bytes` is read whole under a token budget: the estimate counts a
/// token per three bytes at least, so history beyond four bytes per token of the budget
/// can never be sent, and a read stops there.
fn within(budget: Option<u64>, bytes: u64) -> bool {
    budget.is_none_or(|budget| bytes <= budget.saturating_mul(4))
}

/// A history read from the database.
struct Loaded {
    history: History,
    last_seq: i64,
    bytes: u64,
    /// Every item after the summary was read: none was left out for the budget.
    whole: bool,
}

async fn load(
    engine: &Engine, tenant: &str, session_id: &SessionId, budget: Option<u64>,
    rename: Option<&Rename<'_>>,
) -> Result<Loaded, StoreError> {
    let mut loaded = Loaded { history: History::default(), last_seq: 0, bytes: 0, whole: true };
    let mut page = PageRequest::first(PageRequest::MAX_LIMIT, Order::Desc);
    let mut found = match engine.store.list_items(tenant, session_id, &page).await {
        Ok(found) => found,
        Err(StoreError::SessionNotFound) => return Ok(loaded),
        Err(error) => return Err(error),
    };
    // An empty session has no summary either (a compaction goes with the items it
    // summarises), so a new session's first turn reads nothing more.
    if found.data.is_empty() {
        return Ok(loaded);
    }
    // A session deleted since its items were read reads as one without a compaction;
    // the turn's append then fails as the session is gone.
    let compaction = engine.store.latest_compaction(tenant, session_id).await?;
    let after = compaction.as_ref().map_or(0, |c| c.through_seq);
    // Read through the summary at least: a compaction may leave no item after it.
    loaded.last_seq = after;
    let mut items = Vec::new();
    'pages: loop {
        for item in &found.data {
            if item.seq <= after {
                break 'pages;
            }
            loaded.last_seq = loaded.last_seq.max(item.seq);
            loaded.bytes += item.item.get().len() as u64;
            items.push(item.clone());
        }
        let enough = !within(budget, loaded.bytes);
        match found.last_id {
            Some(last) if found.has_more && !enough => {
                page.cursor = Some(crate::model::Cursor::After(last));
                found = match engine.store.list_items(tenant, session_id, &page).await {
                    Ok(found) => found,
                    Err(StoreError::SessionNotFound) => {
                        loaded.whole = false;
                        break;
                    }
                    Err(error) => return Err(error),
                };
            }
            _ => {
                loaded.whole = !found.has_more;
                break;
            }
        }
    }
    items.reverse();
    let mut values: Vec<Value> = items.iter().map(|item| parse(&item.item)).collect();
    if let Some(rename) = rename {
        rename(&mut values);
    }
    loaded.history.mcp = items.into_iter().filter(is_mcp).map(|item| item.item).collect();
    loaded.history.prepared.extend(values);
    loaded.history.summary = compaction.map(|c| c.summary);
    Ok(loaded)
}

fn parse(item: &RawValue) -> Value {
    serde_json::from_str(item.get()).unwrap_or(Value::Null)
}

fn is_mcp(item: &Item) -> bool {
    item.item.get().contains("\"mcp_")
}

/// A session's history as a run last read it.
#[derive(Clone)]
struct Kept {
    mark: HistoryMark,
    /// The seq of its newest item.
    last_seq: i64,
    /// Its items' bytes as stored.
    bytes: u64,
    history: History,
}

impl Kept {
    /// About the bytes of memory it holds.
    fn held(&self) -> u64 {
        let mcp: usize = self.history.mcp.iter().map(|item| item.get().len()).sum();
        self.history.prepared.held_bytes() + mcp as u64
    }
}

impl Kept {
    /// Adds items appended since, oldest first.
    fn add(&mut self, items: Vec<Item>) {
        for item in &items {
            self.last_seq = self.last_seq.max(item.seq);
            self.bytes += item.item.get().len() as u64;
        }
        let values: Vec<Value> = items.iter().map(|item| parse(&item.item)).collect();
        self.history.mcp.extend(items.into_iter().filter(is_mcp).map(|item| item.item));
        self.history.prepared.extend(values);
    }
}

type Key = (String, String);

/// The histories this process keeps, by tenant and session.
pub(super) struct Histories {
    capacity: u64,
    kept: Mutex<Lru>,
}

#[derive(Default)]
struct Lru {
    /// Each history with when it was last used and the bytes it holds.
    entries: HashMap<Key, (Kept, u64, u64)>,
    /// Each entry's key by when it was last used.
    by_use: BTreeMap<u64, Key>,
    uses: u64,
    bytes: u64,
}

impl Histories {
    pub fn new(capacity: u64) -> Self {
        Self { capacity, kept: Mutex::default() }
    }

    fn lru(&self) -> std::sync::MutexGuard<'_, Lru> {
        self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes the session's history out: a run that reads it concurrently reads it whole.
    fn take(&self, key: &Key) -> Option<Kept> {
        let mut lru = self.lru();
        let (kept, used, held) = lru.entries.remove(key)?;
        lru.by_use.remove(&used);
        lru.bytes -= held;
        Some(kept)
    }

    /// Keeps the history, dropping the least recently used ones beyond the capacity.
    fn keep(&self, key: Key, kept: Kept) {
        let held = kept.held();
        if held > self.capacity {
            return;
        }
        let mut lru = self.lru();
        if let Some((_, used, old)) = lru.entries.remove(&key) {
            lru.by_use.remove(&used);
            lru.bytes -= old;
        }
        while lru.bytes + held > self.capacity {
            let Some((_, oldest)) = lru.by_use.pop_first() else { break };
            if let Some((_, _, old)) = lru.entries.remove(&oldest) {
                lru.bytes -= old;
            }
        }
        lru.uses += 1;
        let used = lru.uses;
        lru.bytes += held;
        lru.by_use.insert(used, key.clone());
        lru.entries.insert(key, (kept, used, held));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A history of `items` user messages of about 100 bytes each.
    fn kept(items: usize) -> Kept {
        let mut history = History::default();
        let text = "x".repeat(60);
        history.prepared.extend((0..items).map(|_| json!({"role": "user", "content": text})));
        let mark = HistoryMark { session_pk: 1, created_at: chrono::Utc::now(), rewrites: 0 };
        Kept { mark, last_seq: 0, bytes: 0, history }
    }

    fn key(session: &str) -> Key {
        ("tenant".into(), session.into())
    }

    #[test]
    fn the_least_recently_used_go_first_and_the_bound_holds() {
        let one = kept(30).held();
        assert!(one > 30 * 60, "{one}");
        let histories = Histories::new(one * 2 + one / 2);
        for session in ["a", "b", "c"] {
            histories.keep(key(session), kept(30));
        }
        assert!(histories.lru().bytes <= histories.capacity);
        assert!(histories.take(&key("a")).is_none(), "the oldest is dropped");
        assert!(histories.take(&key("c")).is_some());
        assert_eq!(histories.lru().bytes, one, "taken out, c no longer counts");
        // One too large to keep at all is not kept, and drops nothing.
        histories.keep(key("big"), kept(100));
        assert!(histories.take(&key("big")).is_none());
        assert!(histories.take(&key("b")).is_some());
    }
}
