//! Encryption at rest: what a conversation says is stored encrypted, read back byte for
//! byte, readable after a key rotation, and never returned as garbage without its key.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::json;

use agent_sessions::store::{Keyring, PayloadCodec};

use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(
    conversations_are_encrypted_at_rest_and_read_back_exactly,
    a_canary_is_found_nowhere_at_rest,
    reencrypt_moves_every_value_to_the_new_key_and_aad_binds_them,
);

const K1: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const K2: &str = "k2:HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=";

fn codec(keys: &str) -> PayloadCodec {
    PayloadCodec::new(Keyring::parse(keys).unwrap())
}

async fn conversations_are_encrypted_at_rest_and_read_back_exactly(db: TestDb) {
    // A value stored before encryption was turned on.
    let plain = TestApp::new(db.clone_handle(), &test_config());
    plain
        .post("/v1/sessions/enc/items", json!({"items": [{"role": "user", "content": "before"}]}))
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
        .post("/v1/agents", json!({"instructions": "top secret instructions"}))
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
    assert!(items[1].starts_with("enc:v1:k1:") && !items[1].contains("secret"), "{items:?}");
    for sql in ["select body from agents", "select response from idempotency_keys"] {
        let stored = db.strings(sql).await;
        assert!(!stored.is_empty(), "{sql}");
        assert!(
            stored.iter().all(|v| v.starts_with("enc:v1:k1:") && !v.contains("secret")),
            "{sql}: {stored:?}"
        );
    }

    // Rotated: k2 encrypts, k1 still decrypts.
    let rotated = TestApp::new(db.reopen(codec(&format!("{K2},{K1}"))).await, &test_config());
    assert!(rotated.get("/v1/sessions/enc/items").await.text.contains(item));
    rotated
        .post("/v1/sessions/enc/items", json!({"items": [{"role": "user", "content": "after"}]}))
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

/// With keys set, what a user, a model, an agent and a webhook's headers say is stored
/// only encrypted: a scan of every column of every table (and, on SQLite, of the
/// database file) finds none of it.
async fn a_canary_is_found_nowhere_at_rest(db: TestDb) {
    const CANARY: &str = "CANARY-7f3a";
    let t = crate::runs::RunsApp::configured(db.reopen(codec(K1)).await, |c| {
        c.tool_webhook_allowed_hosts = vec!["127.0.0.1:9".into()];
    })
    .await;
    let tool = json!({"type": "function", "name": "hook",
        "webhook": {"url": "http://127.0.0.1:9/hook", "headers": {"x-secret": CANARY}}});
    let agent = t
        .app
        .post("/v1/agents", json!({"instructions": format!("You know {CANARY}."), "tools": [tool]}))
        .await
        .expect(StatusCode::CREATED);
    t.app
        .post(
            "/v1/sessions/c/items",
            json!({"items": [{"role": "user", "content": format!("appended {CANARY}")}]}),
        )
        .await
        .expect(StatusCode::CREATED);
    t.app
        .call(
            axum::http::Method::PUT,
            "/v1/sessions/c/state",
            Some(json!({"state": {"remembered": CANARY}, "app_id": "a", "user_id": "u"})),
        )
        .await
        .expect(StatusCode::OK);
    let delta = json!({"items": [], "user_state_delta": {"user": CANARY},
        "app_state_delta": {"app": CANARY}});
    t.app.post("/v1/sessions/c/items", delta).await.expect(StatusCode::CREATED);
    let encoded = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(CANARY)
    };
    let value = json!({"type": "json", "data": encoded});
    let checkpoint = json!({"checkpoint": value, "channel_versions": {"c": "1"},
        "blobs": [{"channel": "c", "version": "1", "type": "json", "data": encoded}]});
    t.app
        .call(axum::http::Method::PUT, "/v1/sessions/c/checkpoints/k1", Some(checkpoint))
        .await
        .expect(StatusCode::OK);
    let writes = json!({"task_id": "t", "writes": [{"idx": 0, "channel": "c", "type": "json", "data": encoded}]});
    t.app.post("/v1/sessions/c/checkpoints/k1/writes", writes).await.expect(StatusCode::NO_CONTENT);
    let read = t.app.get("/v1/sessions/c/state?include=user,app").await.expect(StatusCode::OK);
    assert_eq!(
        (&read["user_state"]["user"], &read["app_state"]["app"]),
        (&json!(CANARY), &json!(CANARY))
    );
    t.llm.push(crate::fake_llm::Reply::text(&format!("the model says {CANARY}")));
    let run = t
        .app
        .post(
            "/v1/sessions/c/runs",
            json!({"input": format!("asked {CANARY}"), "agent_id": agent["id"]}),
        )
        .await
        .expect(StatusCode::OK);
    assert_eq!(run["status"], "completed", "{run}");
    let request = &t.llm.requests()[0];
    assert!(request.to_string().contains(&format!("You know {CANARY}")));
    let items = t.items("c").await;
    assert_eq!(items.len(), 3);
    assert!(items[2].to_string().contains(CANARY));

    let dump = db.dump().await;
    assert!(dump.contains("enc:v1:k1:"));
    assert!(!dump.contains(CANARY), "{dump}");
    assert!(!dump.contains(&encoded), "{dump}");
    if let Some(bytes) = db.file_bytes().await {
        let needle = CANARY.as_bytes();
        assert!(!bytes.windows(needle.len()).any(|w| w == needle));
    }
}

/// Rotation end to end: written under k1, read with `k2,k1`, `reencrypt`, then read with
/// `k2` alone; a value moved to another tenant or column does not decrypt.
async fn reencrypt_moves_every_value_to_the_new_key_and_aad_binds_them(db: TestDb) {
    let old = TestApp::new(db.reopen(codec(K1)).await, &test_config());
    for n in 0..7 {
        old.post(
            &format!("/v1/sessions/s{n}/items"),
            json!({"items": [{"role": "user", "content": format!("message {n}")}]}),
        )
        .await
        .expect(StatusCode::CREATED);
    }
    let agent = old
        .post("/v1/agents", json!({"instructions": "kept secret"}))
        .await
        .expect(StatusCode::CREATED);
    let agent_path = format!("/v1/agents/{}", agent["id"].as_str().unwrap());
    let state = Some(json!({"state": {"plan": "kept sealed"}}));
    old.call(axum::http::Method::PUT, "/v1/sessions/s1/state", state.clone())
        .await
        .expect(StatusCode::OK);
    old.call(axum::http::Method::PUT, "/v1/apps/a/state", state).await.expect(StatusCode::OK);
    let before = db.strings("select body from items order by id").await;

    let both = db.reopen(codec(&format!("{K2},{K1}"))).await;
    let counts = both.store.count_values_by_key().await.unwrap();
    assert_eq!(counts.get(&Some("k1".into())), Some(&10), "{counts:?}");
    let reports = std::sync::Mutex::new(Vec::new());
    let rewritten = both.store.reencrypt(3, &|p| reports.lock().unwrap().push(p)).await.unwrap();
    assert_eq!(rewritten, 10);
    let reports = reports.into_inner().unwrap();
    let items: Vec<_> = reports.iter().filter(|p| p.column == "items.body").collect();
    assert_eq!(
        items.iter().map(|p| (p.done, p.total)).collect::<Vec<_>>(),
        [(3, 7), (6, 7), (7, 7)]
    );
    let counts = both.store.count_values_by_key().await.unwrap();
    assert_eq!(counts.keys().collect::<Vec<_>>(), [&Some("k2".to_owned())]);
    let after = db.strings("select body from items order by id").await;
    assert!(after.iter().all(|v| v.starts_with("enc:v1:k2:")));
    let states = db.strings("select state from sessions where state is not null").await;
    assert!(states.len() == 1 && states[0].starts_with("enc:v1:k2:"), "{states:?}");
    let apps = db.strings("select state from owner_states").await;
    assert!(apps.len() == 1 && apps[0].starts_with("enc:v1:k2:"), "{apps:?}");
    assert_ne!(before, after);
    // Run again (after a kill, say): nothing is left to do.
    assert_eq!(both.store.reencrypt(3, &|_| {}).await.unwrap(), 0);

    let new_only = TestApp::new(db.reopen(codec(K2)).await, &test_config());
    for n in 0..7 {
        let page = new_only.get(&format!("/v1/sessions/s{n}/items")).await;
        assert!(page.text.contains(&format!("message {n}")), "{}", page.text);
    }
    assert_eq!(
        new_only.get(&agent_path).await.expect(StatusCode::OK)["instructions"],
        "kept secret"
    );
    let state = new_only.get("/v1/sessions/s1/state").await.expect(StatusCode::OK);
    assert_eq!(state["state"]["plan"], "kept sealed");
    let app_state = new_only.get("/v1/apps/a/state").await.expect(StatusCode::OK);
    assert_eq!(app_state["state"]["plan"], "kept sealed");
    // /readyz is ready: every stored key id is configured.
    new_only.key_census.count(&*new_only.store, &new_only.metrics).await;
    new_only.get("/readyz").await.expect(StatusCode::OK);
    let metrics = new_only.get("/metrics").await.text;
    assert!(metrics.contains(r#"agent_sessions_stored_values{key_id="k2"} 10"#), "{metrics}");

    // Bound to tenant and column: moved elsewhere, a value does not decrypt.
    let listed = new_only.get("/v1/sessions/s0/items").await.json();
    let item_id = uuid::Uuid::parse_str(listed["data"][0]["id"].as_str().unwrap()).unwrap();
    db.execute("update sessions set tenant_id = 'other' where id = 's0'").await;
    db.execute("update items set tenant_id = 'other' where session_pk = (select pk from sessions where id = 's0')")
        .await;
    let sid = agent_sessions::model::SessionId::parse("id", "s0".into()).unwrap();
    let moved = new_only.store.get_item("other", &sid, item_id).await;
    assert!(matches!(moved, Err(agent_sessions::store::StoreError::Corrupt(_))), "{moved:?}");
    db.execute("update agents set body = (select body from items where tenant_id = 'default' order by id limit 1)")
        .await;
    new_only
        .get(&agent_path)
        .await
        .expect_problem(StatusCode::INTERNAL_SERVER_ERROR, "internal_error");

    // A key id the service lacks: /readyz names it.
    let forgetful = TestApp::new(
        db.reopen(codec("k3:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")).await,
        &test_config(),
    );
    forgetful.key_census.count(&*forgetful.store, &forgetful.metrics).await;
    let detail = forgetful
        .get("/readyz")
        .await
        .expect_problem(StatusCode::SERVICE_UNAVAILABLE, "encryption_key_missing");
    assert!(detail.contains("k2"), "{detail}");
}
