//! What a write is conditional on: its `Idempotency-Key` (a retry does nothing more) and
//! its `If-Match` (only at this revision), taken together because every write that takes
//! one takes the other, and a retry must repeat both.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use utoipa::openapi::path::{Parameter, ParameterIn};
use utoipa::IntoParams;

use super::IdempotencyHeader;
use crate::http::error::ApiError;
use crate::http::revision::IfMatchHeader;
use crate::model::{IdempotencyKey, IfMatch, InvalidField, SessionId};

pub struct Preconditions {
    idempotency: IdempotencyHeader,
    pub if_match: Option<IfMatch>,
}

impl Preconditions {
    /// The key of a write of `target` to `session` with `body`; the revision it asks for
    /// is part of what a retry repeats.
    pub fn write_key(
        &self, session: &SessionId, target: &str, body: &str,
    ) -> Result<Option<IdempotencyKey>, ApiError> {
        let target = format!("{target}\0{:?}", self.if_match);
        self.idempotency.key(|key| IdempotencyKey::for_write(key, session, &target, body))
    }

    /// The key with the fingerprint that `fingerprint` takes of the request (and of the
    /// revision it asks for); none when the request has no key.
    pub fn key(
        &self,
        fingerprint: impl FnOnce(&str, Option<IfMatch>) -> Result<IdempotencyKey, InvalidField>,
    ) -> Result<Option<IdempotencyKey>, ApiError> {
        self.idempotency.key(|key| fingerprint(key, self.if_match))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Preconditions {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Ok(idempotency) = IdempotencyHeader::from_request_parts(parts, state).await;
        let IfMatchHeader(if_match) = IfMatchHeader::from_request_parts(parts, state).await?;
        Ok(Self { idempotency, if_match })
    }
}

impl IntoParams for Preconditions {
    fn into_params(in_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        let mut params = IdempotencyHeader::into_params(&in_);
        params.extend(IfMatchHeader::into_params(in_));
        params
    }
}
