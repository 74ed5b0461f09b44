//! What successful answers of several handlers share: a 201 with what was created, and
//! the header that marks an answer to a retry.

use std::convert::Infallible;

use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, IntoResponseParts, Response, ResponseParts};
use axum::Json;
use serde::Serialize;

use super::revision::ETag;

/// Answers to a retry with a known `Idempotency-Key` say so in this header.
static IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// `Idempotent-Replayed: true` on an answer that repeats the first answer to a request
/// with the same `Idempotency-Key`; no header on a first answer.
pub struct Replayed(pub bool);

impl IntoResponseParts for Replayed {
    type Error = Infallible;

    fn into_response_parts(self, mut parts: ResponseParts) -> Result<ResponseParts, Infallible> {
        if self.0 {
            parts
                .headers_mut()
                .insert(IDEMPOTENT_REPLAYED.clone(), HeaderValue::from_static("true"));
        }
        Ok(parts)
    }
}

/// 201 with what was created as JSON, the path that reads it back in `Location` (where
/// it has one), [`Replayed`], and the session's revision after the write (where known).
pub struct Created<T> {
    body: T,
    location: Option<String>,
    replayed: bool,
    revision: Option<i64>,
}

impl<T> Created<T> {
    /// Created where no path of its own reads it back.
    pub fn new(body: T) -> Self {
        Self { body, location: None, replayed: false, revision: None }
    }

    /// Answers the session's revision after the write as the `ETag`.
    pub fn tagged(self, revision: Option<i64>) -> Self {
        Self { revision, ..self }
    }

    /// Created at the path `location`.
    pub fn at(location: String, body: T) -> Self {
        Self { location: Some(location), ..Self::new(body) }
    }

    /// Marks an answer to a retry as one (see [`Replayed`]).
    pub fn replayed(self, replayed: bool) -> Self {
        Self { replayed, ..self }
    }
}

impl<T: Serialize> IntoResponse for Created<T> {
    fn into_response(self) -> Response {
        // Ids are checked to be visible ASCII, so every path of one is a header value.
        let location = self
            .location
            .and_then(|path| HeaderValue::try_from(path).ok())
            .map(|path| [(header::LOCATION, path)]);
        let tag = self.revision.map(ETag);
        (StatusCode::CREATED, location, tag, Replayed(self.replayed), Json(self.body))
            .into_response()
    }
}
