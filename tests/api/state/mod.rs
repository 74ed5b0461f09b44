//! Agent state: session revisions with `ETag` / `If-Match`, and the state document.

mod checkpoints;
mod documents;
mod history;
mod owners;
mod revisions;

use axum::body::Body;
use axum::http::{Method, Request};
use serde_json::Value;

use crate::helpers::{TestApp, TestResponse};

/// A request with a JSON body (if any) and an `If-Match` (if any).
pub(crate) async fn send(
    app: &TestApp, method: Method, uri: &str, if_match: Option<&str>, body: Option<Value>,
) -> TestResponse {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(tag) = if_match {
        request = request.header("if-match", tag);
    }
    let request = match body {
        Some(body) => {
            request.header("content-type", "application/json").body(Body::from(body.to_string()))
        }
        None => request.body(Body::empty()),
    };
    app.send(request.unwrap()).await
}

/// The revision an answer's `ETag` names.
pub(crate) fn etag(response: &TestResponse) -> i64 {
    let tag = response.header("etag").unwrap_or_else(|| panic!("an ETag: {response:?}"));
    tag.trim_matches('"').parse().unwrap_or_else(|_| panic!("a quoted revision: {tag}"))
}
