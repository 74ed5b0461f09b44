//! API keys: made, listed and revoked by the admin; stored as hashes; revocation reaches
//! every replica.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;

use super::{admin, new_key, with_auth, As};
use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(keys_are_made_listed_and_revoked, a_key_is_stored_only_as_its_hash);

fn app(db: TestDb) -> TestApp {
    let mut config = test_config();
    with_auth(&mut config);
    TestApp::new(db, &config)
}

async fn keys_are_made_listed_and_revoked(db: TestDb) {
    let app = app(db);
    let admin = admin(&app);
    let created = admin.post("/v1/api_keys", json!({"tenant": "acme", "name": "frontend"})).await;
    let location = created.header("location").map(str::to_owned);
    let created = created.expect(StatusCode::CREATED);
    let (id, key) = (created["id"].as_str().unwrap(), created["key"].as_str().unwrap());
    assert_eq!(location.as_deref(), Some(&*format!("/v1/api_keys/{id}")));
    assert!(key.starts_with("ask_") && key.len() >= 47, "{key}");
    assert_eq!(created["prefix"], key[..8]);
    assert_eq!(created["scopes"], json!(["read", "write"]));
    assert_eq!(created["tenant"], "acme");
    assert!(created["expires_at"].is_null() && created["last_used_at"].is_null());
    new_key(&app, "other", json!(["read"])).await;

    // Listed without the key, filtered by tenant.
    let all = admin.get("/v1/api_keys").await.expect(StatusCode::OK);
    assert_eq!(all["data"].as_array().unwrap().len(), 2);
    assert!(!all.to_string().contains(key), "{all}");
    let acme = admin.get("/v1/api_keys?tenant=acme").await.expect(StatusCode::OK);
    assert_eq!(acme["data"].as_array().unwrap().len(), 1);
    assert_eq!(acme["data"][0]["id"], id);
    assert!(acme["data"][0].get("key").is_none());
    let page = admin.get("/v1/api_keys?limit=1").await.expect(StatusCode::OK);
    assert_eq!(
        (page["has_more"].as_bool(), page["data"][0]["id"].as_str()),
        (Some(true), Some(id))
    );

    // Used: last_used_at is kept (off the request path).
    As { app: &app, key: Some(key) }.get("/v1/sessions").await.expect(StatusCode::OK);
    let mut used = serde_json::Value::Null;
    for _ in 0..100 {
        used =
            admin.get("/v1/api_keys?tenant=acme").await.expect(StatusCode::OK)["data"][0].clone();
        if !used["last_used_at"].is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(used["last_used_at"].is_string(), "{used}");

    // Bad input names the field.
    for (body, field) in [
        (json!({"tenant": "a b", "name": "x"}), "tenant:"),
        (json!({"tenant": "acme", "name": ""}), "name:"),
        (json!({"tenant": "acme", "name": "x", "scopes": ["read", "read"]}), "scopes:"),
        (json!({"tenant": "acme", "name": "x", "scopes": []}), "scopes:"),
        (json!({"tenant": "acme", "name": "nul\u{0}"}), "name:"),
        (json!({"tenant": "acme", "name": "x", "scopes": ["admin"]}), "scopes"),
        (json!({"name": "x"}), "tenant"),
    ] {
        let detail = admin
            .post("/v1/api_keys", body.clone())
            .await
            .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");
        assert!(detail.contains(field), "{body}: {detail}");
    }
    admin
        .get("/v1/api_keys?tenant=a%20b")
        .await
        .expect_problem(StatusCode::BAD_REQUEST, "invalid_request");

    // Revoked: refused on the next request.
    admin.delete(&format!("/v1/api_keys/{id}")).await.expect(StatusCode::NO_CONTENT);
    As { app: &app, key: Some(key) }
        .get("/v1/sessions")
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    admin
        .delete(&format!("/v1/api_keys/{id}"))
        .await
        .expect_problem(StatusCode::NOT_FOUND, "api_key_not_found");
    admin
        .delete("/v1/api_keys/not-a-uuid")
        .await
        .expect_problem(StatusCode::NOT_FOUND, "api_key_not_found");

    // An expired key is refused.
    let expired = admin
        .post(
            "/v1/api_keys",
            json!({"tenant": "acme", "name": "old", "expires_at": "2020-01-01T00:00:00Z"}),
        )
        .await
        .expect(StatusCode::CREATED);
    let detail = As { app: &app, key: expired["key"].as_str() }
        .get("/v1/sessions")
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    assert!(detail.contains("expired"), "{detail}");
}

async fn a_key_is_stored_only_as_its_hash(db: TestDb) {
    let app = app(db.clone_handle());
    let (_, key) = new_key(&app, "acme", json!(["read"])).await;
    let mut texts = Vec::new();
    for column in ["tenant_id", "name", "prefix", "key_hash", "scopes"] {
        texts.extend(db.strings(&format!("select {column} from api_keys")).await);
    }
    assert!(!texts.is_empty());
    assert!(texts.iter().all(|text| !text.contains(&key[4..])), "{texts:?}");
    let hash = agent_sessions::model::KeyHash::of(&key).hex();
    assert!(texts.contains(&hash), "{texts:?}");
}

/// A key revoked on one replica stops working on another within `AUTH_CACHE_SECS`.
#[sqlx::test(migrations = "./migrations/postgres")]
async fn a_revoked_key_stops_working_on_every_replica(pool: sqlx::PgPool) {
    let mut config = test_config();
    with_auth(&mut config);
    config.auth_cache_secs = 1;
    let first = TestApp::new(TestDb::postgres_replica(&pool), &config);
    let second = TestApp::new(TestDb::postgres(pool), &config);
    let (id, key) = new_key(&first, "acme", json!(["read"])).await;
    As { app: &second, key: Some(&key) }.get("/v1/sessions").await.expect(StatusCode::OK);
    admin(&first).delete(&format!("/v1/api_keys/{id}")).await.expect(StatusCode::NO_CONTENT);
    As { app: &first, key: Some(&key) }
        .get("/v1/sessions")
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
    // The second replica trusts its cache for at most a second more.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    As { app: &second, key: Some(&key) }
        .get("/v1/sessions")
        .await
        .expect_problem(StatusCode::UNAUTHORIZED, "unauthorized");
}
