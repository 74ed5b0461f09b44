//! A process keeps the histories its runs read and reads only what was appended since:
//! the model still gets, byte for byte, what a process that keeps nothing sends, with the
//! history kept or not, after appends and runs through another replica, a pop, a
//! compaction, a replacement of the history, and a restart.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::fake_llm::{FakeLlm, Reply};
use crate::helpers::{on_both_backends, test_config, TestApp, TestDb};

on_both_backends!(
    the_model_gets_the_same_bytes_whatever_the_process_kept,
    a_kept_history_is_read_again_only_when_its_mark_moves,
);

/// Three replicas on one database and one fake LLM: `kept` keeps histories, `plain`
/// keeps none, `other` is another replica that keeps its own.
struct Replicas {
    kept: TestApp,
    plain: TestApp,
    other: TestApp,
    llm: FakeLlm,
    db: TestDb,
}

impl Replicas {
    async fn start(db: TestDb) -> Self {
        let llm = FakeLlm::start().await;
        let app = |db: TestDb, keep: bool| {
            let mut config = test_config();
            config.llm_base_url = llm.base_url();
            if !keep {
                config.history_cache_mb = 0;
            }
            TestApp::new(db, &config)
        };
        let (kept, plain) = (app(db.clone_handle(), true), app(db.clone_handle(), false));
        let other = app(db.clone_handle(), true);
        Self { kept, plain, other, llm, db }
    }

    /// A sync run on the session through `app`; the body of its request to the model.
    async fn run(&self, app: &TestApp, session: &str, input: &str) -> String {
        let run = app.post(&format!("/v1/sessions/{session}/runs"), json!({"input": input})).await;
        assert_eq!(run.expect(StatusCode::OK)["status"], "completed");
        String::from_utf8(self.llm.last_body().to_vec()).unwrap()
    }

    /// The same run on `k` through `kept` and on `p` through `plain`: their requests
    /// must be one and the same.
    async fn same_request(&self, input: &str) -> String {
        let kept = self.run(&self.kept, "k", input).await;
        let plain = self.run(&self.plain, "p", input).await;
        assert_eq!(kept, plain, "after {input}");
        kept
    }
}

async fn append(app: &TestApp, session: &str, items: Value) {
    let path = format!("/v1/sessions/{session}/items");
    app.post(&path, json!({"items": items})).await.expect(StatusCode::CREATED);
}

fn call(id: &str) -> Value {
    json!({"type": "function_call", "call_id": id, "name": "lookup", "arguments": "{\"q\":1}"})
}

fn output(id: &str) -> Value {
    json!({"type": "function_call_output", "call_id": id, "output": format!("found {id}")})
}

fn history(n: usize) -> Value {
    let items: Vec<Value> = (0..n)
        .flat_map(|i| {
            let id = format!("c{i}");
            [json!({"role": "user", "content": format!("question {i}")}), call(&id), output(&id)]
        })
        .collect();
    Value::Array(items)
}

async fn the_model_gets_the_same_bytes_whatever_the_process_kept(db: TestDb) {
    let t = Replicas::start(db).await;
    for session in ["k", "p"] {
        append(&t.plain, session, history(20)).await;
        // A call that waits for its output: it and what follows stay unsettled.
        append(&t.plain, session, json!([call("late"), {"role": "user", "content": "wait"}])).await;
    }
    let cold = t.same_request("cold").await;
    assert!(cold.contains("question 19") && cold.contains("\"cold\""), "{cold}");
    assert!(!cold.contains("\"late\""), "an unanswered call is left out: {cold}");
    t.same_request("warm").await;

    // The late output, appended through another replica, answers the waiting call.
    append(&t.other, "k", json!([output("late")])).await;
    append(&t.plain, "p", json!([output("late")])).await;
    let answered = t.same_request("after another replica's append").await;
    assert!(answered.contains("found late"), "{answered}");
    // A run through another replica appends a turn this one did not see.
    t.run(&t.other, "k", "elsewhere").await;
    t.run(&t.plain, "p", "elsewhere").await;
    t.same_request("after another replica's run").await;

    for session in ["k", "p"] {
        t.plain.delete(&format!("/v1/sessions/{session}/items/last")).await.expect(StatusCode::OK);
    }
    t.same_request("after a pop").await;

    for session in ["k", "p"] {
        t.llm.push_summary(Reply::text("the earlier conversation"));
        let path = format!("/v1/sessions/{session}/compact");
        t.plain.post(&path, json!({"keep_recent_items": 4})).await.expect(StatusCode::CREATED);
    }
    let compacted = t.same_request("after a compaction").await;
    assert!(compacted.contains("the earlier conversation"), "{compacted}");
    assert!(!compacted.contains("question 3\""), "{compacted}");

    for session in ["k", "p"] {
        let path = format!("/v1/sessions/{session}/items");
        let replaced = json!({"items": history(3)});
        t.plain.call(Method::PUT, &path, Some(replaced)).await.expect(StatusCode::OK);
    }
    let replaced = t.same_request("after a replacement").await;
    assert!(!replaced.contains("the earlier conversation"), "{replaced}");

    // A compaction that keeps no item: the history starts after the summary.
    for session in ["k", "p"] {
        t.llm.push_summary(Reply::text("all of it"));
        let path = format!("/v1/sessions/{session}/compact");
        t.plain.post(&path, json!({"keep_recent_items": 0})).await.expect(StatusCode::CREATED);
    }
    t.same_request("after a compaction of everything").await;
    let after = t.same_request("after it, warm").await;
    assert!(after.contains("all of it") && !after.contains("question 1\""), "{after}");

    let restarted = Replicas { kept: restart(&t), ..t };
    restarted.same_request("after a restart").await;
    restarted.same_request("warm again").await;
}

/// A new process on the same database and fake LLM, keeping nothing yet.
fn restart(t: &Replicas) -> TestApp {
    let mut config = test_config();
    config.llm_base_url = t.llm.base_url();
    TestApp::new(t.db.clone_handle(), &config)
}

async fn a_kept_history_is_read_again_only_when_its_mark_moves(db: TestDb) {
    let t = Replicas::start(db).await;
    append(&t.plain, "k", json!([{"role": "user", "content": "first words"}])).await;
    t.run(&t.kept, "k", "one").await;
    // Changed behind the service's back, the first item is not read again while the
    // session's mark stays: the kept history is what the run sends.
    let changed = r#"{"role": "user", "content": "changed words"}"#;
    let update = format!("update items set body = '{changed}' where seq = 1");
    t.db.execute(&update).await;
    let kept = t.run(&t.kept, "k", "two").await;
    assert!(kept.contains("first words") && !kept.contains("changed words"), "{kept}");
    let plain = t.run(&t.plain, "k", "three").await;
    assert!(plain.contains("changed words"), "{plain}");
    // Any rewrite moves the mark: the history is read whole again.
    t.db.execute("update sessions set rewrites = rewrites + 1").await;
    let reread = t.run(&t.kept, "k", "four").await;
    assert!(reread.contains("changed words") && reread.contains("\"three\""), "{reread}");
    // A session deleted and made again under its id is another history, even where the
    // database gives its row the old one's pk.
    append(&t.plain, "d", json!([{"role": "user", "content": "the old one"}])).await;
    t.run(&t.kept, "d", "kept").await;
    t.plain.delete("/v1/sessions/d").await.expect(StatusCode::NO_CONTENT);
    append(&t.plain, "d", json!([{"role": "user", "content": "a new start"}])).await;
    let again = t.run(&t.kept, "d", "again").await;
    assert!(again.contains("a new start") && !again.contains("the old one"), "{again}");
}
