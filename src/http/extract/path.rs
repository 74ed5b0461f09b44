//! What a request is about: the caller's tenant and the ids of its path, each checked
//! and named when it is wrong. A handler maps its errors through them, so that the detail
//! names the session, item, run or agent; each lists its path parameters for the OpenAPI
//! document.

use std::collections::HashMap;
use std::marker::PhantomData;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use utoipa::openapi::path::{Parameter, ParameterBuilder, ParameterIn};
use utoipa::openapi::schema::{ObjectBuilder, Type};
use utoipa::openapi::Required;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{IntoParams, PartialSchema};
use uuid::Uuid;

use crate::auth::Caller;
use crate::http::error::ApiError;
use crate::model::{CheckpointName, CheckpointPath, Identifier, OwnerDocument, OwnerId, SessionId};
use crate::runs::RunsError;
use crate::store::StoreError;

/// The tenant a request acts for: its API key's, or `default` while auth is off. The
/// auth middleware puts the caller in the request; a route it does not guard has none.
pub struct Tenant(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        Self::of(parts).map(Tenant)
    }
}

impl Tenant {
    /// The tenant of the request, for every extractor that acts within one.
    fn of(parts: &Parts) -> Result<String, ApiError> {
        let caller = parts.extensions.get::<Caller>().and_then(Caller::tenant);
        caller
            .map(str::to_owned)
            .ok_or_else(|| ApiError::Unauthorized("this route needs an API key".into()))
    }
}

/// The session of the `{session_id}` of the path, in the caller's tenant.
pub struct TenantSession {
    pub tenant: String,
    pub id: SessionId,
}

impl TenantSession {
    /// A store error of a request about this session.
    pub fn store_error(&self, error: StoreError) -> ApiError {
        ApiError::from_store(error, self.id.as_str(), None)
    }

    /// A run use case's error of a request about this session.
    pub fn runs_error(&self, error: RunsError) -> ApiError {
        ApiError::from_runs(error, self.id.as_str(), None)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for TenantSession {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let tenant = Tenant::of(parts)?;
        let mut params = path_params(parts, state, "session_id").await?;
        Self::from_params(tenant, &mut params)
    }
}

impl TenantSession {
    /// The session of the caller's tenant that the path's parameters name.
    fn from_params(tenant: String, params: &mut PathParams) -> Result<Self, ApiError> {
        let id = SessionId::parse("session_id", take(params, "session_id")?)?;
        Ok(Self { tenant, id })
    }
}

impl IntoParams for TenantSession {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![path_doc("session_id", "The session id")]
    }
}

/// The item of the `{session_id}` and `{item_id}` of the path, in the caller's tenant.
/// Item ids are UUIDs; any other text names no item, and is looked up as the nil UUID
/// (which no item has) so that an unknown session still answers `session_not_found`
/// first.
pub type TenantItem = SessionRow<ItemParam>;

/// The run of the `{session_id}` and `{run_id}` of the path, in the caller's tenant;
/// like an item id, text that is no UUID names no run.
pub type TenantRun = SessionRow<RunParam>;

/// A row of a session that the path names by UUID after the session's id.
pub struct SessionRow<P> {
    pub tenant: String,
    pub session: SessionId,
    pub id: Uuid,
    /// The id as the path gave it, for the errors to name.
    raw: String,
    param: PhantomData<P>,
}

/// The path parameter that names a session's row, and its description.
pub trait RowParam {
    const NAME: &'static str;
    const DESCRIPTION: &'static str;
}

pub struct ItemParam;

impl RowParam for ItemParam {
    const NAME: &'static str = "item_id";
    const DESCRIPTION: &'static str = "The item id";
}

pub struct RunParam;

impl RowParam for RunParam {
    const NAME: &'static str = "run_id";
    const DESCRIPTION: &'static str = "The run id";
}

impl<P> SessionRow<P> {
    /// A store error of a request about this row.
    pub fn store_error(&self, error: StoreError) -> ApiError {
        ApiError::from_store(error, self.session.as_str(), Some(&self.raw))
    }

    /// A run use case's error of a request about this row.
    pub fn runs_error(&self, error: RunsError) -> ApiError {
        ApiError::from_runs(error, self.session.as_str(), Some(&self.raw))
    }
}

impl<P: RowParam, S: Send + Sync> FromRequestParts<S> for SessionRow<P> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let tenant = Tenant::of(parts)?;
        let mut params = path_params(parts, state, "session_id").await?;
        let TenantSession { tenant, id: session } =
            TenantSession::from_params(tenant, &mut params)?;
        let raw = take(&mut params, P::NAME)?;
        // Text that is no UUID gives the nil UUID, which names no row.
        let id = Uuid::parse_str(&raw).unwrap_or(Uuid::nil());
        Ok(Self { tenant, session, id, raw, param: PhantomData })
    }
}

impl<P: RowParam> IntoParams for SessionRow<P> {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![path_doc("session_id", "The session id"), path_doc(P::NAME, P::DESCRIPTION)]
    }
}

/// The agent of the `{agent_id}` of the path, in the caller's tenant.
pub struct TenantAgent {
    pub tenant: String,
    pub id: String,
}

impl TenantAgent {
    /// A store error of a request about this agent.
    pub fn store_error(&self, error: StoreError) -> ApiError {
        ApiError::from_agent_store(error, &self.id)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for TenantAgent {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let tenant = Tenant::of(parts)?;
        let mut params = path_params(parts, state, "agent_id").await?;
        Ok(Self { tenant, id: take(&mut params, "agent_id")? })
    }
}

impl IntoParams for TenantAgent {
    fn into_params(_: impl Fn() -> Option<ParameterIn>) -> Vec<Parameter> {
        vec![path_doc("agent_id", "The agent id")]
    }
}

/// The app's or user's state document of the `{app_id}` (and `{user_id}`) of the path,
/// in the caller's tenant.
pub struct TenantOwner {
    pub tenant: String,
    pub document: OwnerDocument,
}

impl TenantOwner {
    /// A store error of a request about this document.
    pub fn store_error(&self, error: StoreError) -> ApiError {
        let whose = match &self.document {
            OwnerDocument::App(app) => format!("app `{}`", app.as_str()),
            OwnerDocument::User(app, user) => {
                format!("user `{}` of app `{}`", user.as_str(), app.as_str())
            }
        };
        match error {
            StoreError::StateNotFound => ApiError::StateNotFound(format!("{whose} has no state")),
            StoreError::RevisionMismatch { current: Some(current) } => ApiError::RevisionMismatch(
                format!("the state of {whose} is at revision {current}, not the one If-Match names; nothing was written"),
            ),
            StoreError::RevisionMismatch { current: None } => ApiError::RevisionMismatch(format!(
                "{whose} has no state, and If-Match asks that it has"
            )),
            other => other.into(),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for TenantOwner {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let tenant = Tenant::of(parts)?;
        let mut params = path_params(parts, state, "app_id").await?;
        let app = OwnerId::parse("app_id", take(&mut params, "app_id")?)?;
        let document = match params.remove("user_id") {
            Some(user) => OwnerDocument::User(app, OwnerId::parse("user_id", user)?),
            None => OwnerDocument::App(app),
        };
        Ok(Self { tenant, document })
    }
}

/// The schema of a parameter that names something by a client-chosen id, by its name.
pub fn id_schema(name: &str) -> Option<RefOr<Schema>> {
    match name {
        "session_id" | "app_id" | "user_id" => Some(Identifier::schema()),
        "checkpoint_id" => Some(CheckpointName::schema()),
        "namespace" => Some(CheckpointPath::schema()),
        _ => None,
    }
}

type PathParams = HashMap<String, String>;

/// The parameters of the path, read once for all the ids an extractor takes; a path that
/// cannot be read is blamed on `first`, the first of them.
async fn path_params<S: Send + Sync>(
    parts: &mut Parts, state: &S, first: &str,
) -> Result<PathParams, ApiError> {
    let params = Path::<PathParams>::from_request_parts(parts, state).await;
    params
        .map(|Path(params)| params)
        .map_err(|rejection| ApiError::invalid(first, rejection.body_text()))
}

fn take(params: &mut PathParams, name: &str) -> Result<String, ApiError> {
    params
        .remove(name)
        .ok_or_else(|| ApiError::Internal(format!("the route has no `{name}` parameter")))
}

/// A path parameter as the OpenAPI document describes it; `openapi.rs` gives the
/// session id its pattern.
fn path_doc(name: &str, description: &str) -> Parameter {
    ParameterBuilder::new()
        .name(name)
        .parameter_in(ParameterIn::Path)
        .required(Required::True)
        .description(Some(description))
        .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
        .build()
}
