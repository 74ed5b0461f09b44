//! Combined appends on SQLite.

use sqlx::SqliteConnection;

use super::shared::appends::append_in;
use crate::model::ExpiresAfter;
use crate::store::combined_writes::Append;
use crate::store::payload::PayloadCodec;
use crate::store::timestamp::Timestamp;
use crate::store::{Appended, Result};

/// Makes the appends in one transaction, one after another: the single writer takes no
/// locks and its statements cost no round trips, so combining saves the commits (and
/// their syncs to disk) and nothing else needs to.
pub(super) async fn append_many(
    conn: &mut SqliteConnection, codec: &PayloadCodec, default_expiry: Option<ExpiresAfter>,
    appends: &[Append], now: Timestamp,
) -> Result<Vec<Option<Appended>>> {
    let mut appended = Vec::with_capacity(appends.len());
    for append in appends {
        appended.push(Some(append_in(conn, codec, default_expiry, append, now).await?));
    }
    Ok(appended)
}
