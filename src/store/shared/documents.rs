//! State documents as their columns hold them.

use crate::model::StateDocument;
use crate::store::payload::{Column, PayloadCodec};
use crate::store::Result;

/// A state document as `column` holds it: sealed, or null for the empty object.
pub(crate) fn open_state(
    codec: &PayloadCodec, tenant: &str, column: Column, stored: Option<String>,
) -> Result<StateDocument> {
    match stored {
        Some(sealed) => Ok(StateDocument::stored(codec.open(tenant, column, sealed)?)),
        None => Ok(StateDocument::empty()),
    }
}
