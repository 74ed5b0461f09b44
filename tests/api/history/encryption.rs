//! Encryption at rest: what a conversation says is stored encrypted, read back byte for
//! byte, readable after a key rotation, and never returned as garbage without its key.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;

use agent_sessions::store::{Keyring, PayloadCodec};

use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(conversations_are_encrypted_at_rest_and_read_back_exactly);

const K1: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const K2: &str = "k2:HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=";

fn codec(keys: &str) -> PayloadCodec {
    PayloadCodec::new(Keyring::parse(keys).unwrap())
}

async fn conversations_are_encrypted_at_rest_and_read_back_exactly(db: TestDb) {
    // A value stored before encryption was turned on.
    let plain = TestApp::new(db.clone_handle(), &test_config());
    plain
        .post(
            "/v1/sessions/enc/items",
            json!({"items": [{"role": "user", "content": "before"}]}),
        )
        .await
        .expect(StatusCode::CREATED);

    let app = TestApp::new(db.reopen(codec(K1)).await, &test_config());
    let item =
        r#"{"z":1,"a":[1.5,null,true],"big":123456789012345678901234567890,"ü":"😀 secret"}"#;
    let request = Request::post("/v1/sessions/enc/items")
        .header("content-type", "application/json")
        .header("idempotency-key", "enc-1")
        .body(Body::from(format!(r#"{{"items":[{item}]}}"#)))
        .unwrap();
    app.send(request).await.expect(StatusCode::CREATED);
    let agent = app
        .post(
            "/v1/agents",
            json!({"instructions": "top secret instructions"}),
        )
        .await
        .expect(StatusCode::CREATED);
    let agent_path = format!("/v1/agents/{}", agent["id"].as_str().unwrap());

    let listed = app.get("/v1/sessions/enc/items").await;
    assert!(listed.text.contains(item), "{}", listed.text);
    assert!(listed.text.contains("before"), "{}", listed.text);
    assert_eq!(
        app.get(&agent_path).await.expect(StatusCode::OK)["instructions"],
        "top secret instructions"
    );

    // At rest: ciphertext under k1, beside the plain value of before.
    let items = db.strings("select body from items order by seq").await;
    assert!(items[0].contains("before"), "{items:?}");
    assert!(
        items[1].starts_with("enc:v1:k1:") && !items[1].contains("secret"),
        "{items:?}"
    );
    for sql in [
        "select body from agents",
        "select response from idempotency_keys",
    ] {
        let stored = db.strings(sql).await;
        assert!(!stored.is_empty(), "{sql}");
        assert!(
            stored
                .iter()
                .all(|v| v.starts_with("enc:v1:k1:") && !v.contains("secret")),
            "{sql}: {stored:?}"
        );
    }

    // Rotated: k2 encrypts, k1 still decrypts.
    let rotated = TestApp::new(
        db.reopen(codec(&format!("{K2},{K1}"))).await,
        &test_config(),
    );
    assert!(rotated
        .get("/v1/sessions/enc/items")
        .await
        .text
        .contains(item));
    rotated
        .post(
            "/v1/sessions/enc/items",
            json!({"items": [{"role": "user", "content": "after"}]}),
        )
        .await
        .expect(StatusCode::CREATED);
    assert!(db.strings("select body from items order by seq").await[2].starts_with("enc:v1:k2:"));

    // Without k1: a named 500, never garbage.
    let forgetful = TestApp::new(db.reopen(codec(K2)).await, &test_config());
    for path in ["/v1/sessions/enc/items", agent_path.as_str()] {
        let detail = forgetful
            .get(path)
            .await
            .expect_problem(StatusCode::INTERNAL_SERVER_ERROR, "encryption_key_missing");
        assert!(detail.contains("`k1`"), "{path}: {detail}");
    }
}
