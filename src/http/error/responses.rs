//! The problem+json responses that the OpenAPI document names, one marker type each.

use std::collections::BTreeMap;

use utoipa::openapi::content::ContentBuilder;
use utoipa::openapi::response::{Response as ResponseDoc, ResponseBuilder};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{IntoResponses, ToResponse};

/// Declares the problem+json responses that operations refer to by name.
macro_rules! problem_responses {
    ($($name:ident => $description:literal,)*) => {$(
        #[doc = $description]
        pub struct $name;

        impl<'s> ToResponse<'s> for $name {
            fn response() -> (&'s str, RefOr<ResponseDoc>) {
                (stringify!($name), problem_response($description))
            }
        }
    )*};
}

problem_responses! {
    BadRequest => "`invalid_request`: the detail names the field at fault; `nothing_to_compact`: the session has no more than `keep_recent_items` items to summarise",
    NotFound => "`session_not_found`, `item_not_found`, `session_empty`, `agent_not_found`, `run_not_found`, `api_key_not_found`, `state_not_found` (an app or user without a state document) or `checkpoint_not_found`; another tenant's object is not found either",
    Unauthorized => "`unauthorized` (with `WWW-Authenticate: Bearer`): authentication is on (`ADMIN_API_KEY`) and the request has no key, or an unknown, revoked or expired one",
    Forbidden => "`forbidden`: a `read` key on a POST, PATCH or DELETE; the admin key on a data route, or a tenant's key on `/v1/api_keys`",
    RateLimited => "`rate_limited` (with `Retry-After` and `RateLimit-*`): the key made more requests than `RATE_LIMIT_PER_KEY` allows",
    Conflict => "`session_exists`: the id is taken; `session_busy`: the session has an unfinished run, named in the detail; `run_finished` or `run_not_requires_action`: the run is not in a state that allows this; `history_changed`: items were deleted while the session was being compacted; `owner_mismatch`: the session belongs to another app or user (the detail names the field)",
    KeyReused => "`idempotency_key_reused`: the key came with a different request before",
    RevisionMismatch => "`revision_mismatch`: `If-Match` names another revision than the session's or the state document's (the detail names the current one), or it does not exist; nothing was written",
    LlmFailed => "`llm_rate_limited` (429), `llm_timeout` (504), `llm_unavailable`, `llm_bad_response` or `llm_auth_failed` (502), `llm_bad_request` or `context_too_long` (400): the summarising LLM call failed and nothing was stored",
    PayloadTooLarge => "`payload_too_large`: the body is over MAX_BODY_BYTES",
    UnsupportedMediaType => "`unsupported_media_type`: the body is not JSON",
    Unavailable => "`database_unavailable` (with `Retry-After`: retry, with the same `Idempotency-Key`), or `request_timeout` when the request ran over the time limit; on `/readyz`, `encryption_key_missing` or `shutting_down`",
    StorageFull => "`storage_full` (with `Retry-After`): the database's disk is full; nothing of the write was stored",
    Internal => "`internal_error`: logged with the request id; `encryption_key_missing`: a stored value is encrypted under a key id (named) that ENCRYPTION_KEYS does not hold",
}

fn problem_response(description: &str) -> RefOr<ResponseDoc> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/problem+json",
            ContentBuilder::new().schema(Some(Ref::from_schema_name("Problem"))).build(),
        )
        .build()
        .into()
}

/// Declares sets of the responses above that many operations answer together, so that an
/// operation lists only what is its own.
macro_rules! response_sets {
    ($($(#[$doc:meta])* $set:ident => [$($status:literal => $name:ident),+],)*) => {$(
        $(#[$doc])*
        pub struct $set;

        impl IntoResponses for $set {
            fn responses() -> BTreeMap<String, RefOr<ResponseDoc>> {
                BTreeMap::from([$(
                    ($status.to_owned(), Ref::from_response_name(stringify!($name)).into()),
                )+])
            }
        }
    )*};
}

response_sets! {
    /// What an operation on a named object answers when the name is malformed or unknown.
    Lookup => ["400" => BadRequest, "404" => NotFound],
    /// What an operation answers to a JSON body it cannot take.
    JsonBody => ["400" => BadRequest, "413" => PayloadTooLarge, "415" => UnsupportedMediaType],
    /// What a write with a JSON body and an `Idempotency-Key` answers when it cannot be
    /// made: a body it cannot take, a conflict with the object's state, a key reused.
    JsonWrite => [
        "400" => BadRequest,
        "409" => Conflict,
        "413" => PayloadTooLarge,
        "415" => UnsupportedMediaType,
        "422" => KeyReused
    ],
}
