//! Authentication and tenants: keys, scopes, isolation, rate limits and fair runs.

mod gate;
mod keys;
mod scheduling;
mod tenants;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{json, Value};

use crate::helpers::{TestApp, TestResponse};

pub const ADMIN_KEY: &str = "admin-key-for-the-tests-0123456789abcdef";

/// Turns authentication on.
pub fn with_auth(config: &mut agent_sessions::config::Config) {
    config.admin_api_key = Some(ADMIN_KEY.into());
}

/// Requests to an app, with a bearer key or none.
pub struct As<'a> {
    pub app: &'a TestApp,
    pub key: Option<&'a str>,
}

impl As<'_> {
    pub async fn call(&self, method: Method, uri: &str, body: Option<Value>) -> TestResponse {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(key) = self.key {
            request = request.header("authorization", format!("Bearer {key}"));
        }
        let request = match body {
            Some(body) => request
                .header("content-type", "application/json")
                .body(Body::from(body.to_string())),
            None => request.body(Body::empty()),
        };
        self.app.send(request.unwrap()).await
    }

    pub async fn get(&self, uri: &str) -> TestResponse {
        self.call(Method::GET, uri, None).await
    }

    pub async fn post(&self, uri: &str, body: Value) -> TestResponse {
        self.call(Method::POST, uri, Some(body)).await
    }

    pub async fn patch(&self, uri: &str, body: Value) -> TestResponse {
        self.call(Method::PATCH, uri, Some(body)).await
    }

    pub async fn delete(&self, uri: &str) -> TestResponse {
        self.call(Method::DELETE, uri, None).await
    }
}

pub fn admin(app: &TestApp) -> As<'_> {
    As { app, key: Some(ADMIN_KEY) }
}

/// A new key of `tenant` with `scopes`, made by the admin: (id, key).
pub async fn new_key(app: &TestApp, tenant: &str, scopes: Value) -> (String, String) {
    let created = admin(app)
        .post(
            "/v1/api_keys",
            json!({"tenant": tenant, "name": format!("{tenant} test"), "scopes": scopes}),
        )
        .await
        .expect(StatusCode::CREATED);
    (created["id"].as_str().unwrap().to_owned(), created["key"].as_str().unwrap().to_owned())
}
