//! The OpenAI routes over the engine: what only the service can show from inside (the
//! stored rows, the model's requests), on both backends. The real `openai` and Agents
//! SDK clients drive the same routes in `clients/python/tests/openai_api`.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{json, Value};

use super::{until_called, RunsApp};
use crate::fake_llm::Reply;
use crate::helpers::{on_both_backends, TestDb};

on_both_backends!(
    chains_branch_and_failures_append_nothing,
    an_unstored_response_leaves_nothing_behind,
    a_compaction_is_sealed_for_its_tenant_and_opens_only_untouched,
    refusals_name_the_field_the_document_constrains,
    models_and_unrouted_requests_answer_openai_clients,
    a_background_stream_is_resumed_where_it_was_left,
    an_output_must_answer_a_call,
    a_responses_items_have_their_conversation_items_ids,
    a_busy_conversation_names_the_response_in_progress,
);

async fn create(t: &RunsApp, body: Value) -> Value {
    t.app.post("/v1/responses", body).await.expect(StatusCode::OK)
}

/// The texts of the messages the model was sent last.
fn last_prompt(t: &RunsApp) -> Vec<String> {
    let requests = t.llm.requests();
    let messages = requests.last().unwrap()["messages"].as_array().unwrap().clone();
    messages.iter().map(|m| m["content"].as_str().unwrap_or_default().to_owned()).collect()
}

async fn chains_branch_and_failures_append_nothing(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::text("one"));
    let first = create(&t, json!({"model": "gpt-4.1", "input": "a"})).await;
    t.llm.push(Reply::text("two"));
    let second = create(&t, json!({"input": "b", "previous_response_id": first["id"]})).await;
    assert_eq!(last_prompt(&t), ["a", "one", "b"]);
    // Answering the first again branches: the second is not in the model's view.
    t.llm.push(Reply::text("three"));
    create(&t, json!({"input": "c", "previous_response_id": first["id"]})).await;
    assert_eq!(last_prompt(&t), ["a", "one", "c"]);
    t.llm.push(Reply::text("four"));
    create(&t, json!({"input": "d", "previous_response_id": second["id"]})).await;
    assert_eq!(last_prompt(&t), ["a", "one", "b", "two", "d"]);

    // A conversation takes the turn atomically; a failed response adds nothing.
    let conversation = t.app.post("/v1/conversations", json!({})).await.expect(StatusCode::OK);
    let id = conversation["id"].as_str().unwrap();
    t.llm.push(Reply::status(400));
    let refused = t
        .app
        .post("/v1/responses", json!({"input": "e", "conversation": id}))
        .await
        .expect(StatusCode::BAD_REQUEST);
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("llm_bad_request"), "{refused}");
    // The failed response is kept under the id the message names.
    let kept = message.split('`').find(|part| part.starts_with("resp_")).unwrap();
    let failed = t.app.get(&format!("/v1/responses/{kept}")).await.expect(StatusCode::OK);
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(t.items(id).await, Vec::<Value>::new());
    let both = t
        .app
        .post(
            "/v1/responses",
            json!({"input": "e", "conversation": id, "previous_response_id": kept}),
        )
        .await
        .expect(StatusCode::BAD_REQUEST);
    assert!(
        both["error"]["message"].as_str().unwrap().starts_with("Mutually exclusive parameters"),
        "{both}"
    );
    t.llm.push(Reply::text("five"));
    let done = create(&t, json!({"input": "e", "conversation": {"id": id}})).await;
    assert_eq!(done["conversation"], json!({"id": id}));
    assert_eq!(t.items(id).await.len(), 2);
}

async fn an_unstored_response_leaves_nothing_behind(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::text("secret answer"));
    let response = create(&t, json!({"input": "secret question", "store": false})).await;
    assert_eq!(response["output"][0]["content"][0]["text"], "secret answer");
    let id = response["id"].as_str().unwrap();
    let missing = t.app.get(&format!("/v1/responses/{id}")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);
    let chained =
        t.app.post("/v1/responses", json!({"input": "x", "previous_response_id": id})).await;
    assert_eq!(chained.status, StatusCode::BAD_REQUEST);
    assert_eq!(chained.json()["error"]["code"], "previous_response_not_found");
    // The session it ran on is deleted once it is answered.
    let mut left = usize::MAX;
    for _ in 0..100 {
        let sessions = t.app.get("/v1/sessions").await.expect(StatusCode::OK);
        left = sessions["data"].as_array().unwrap().len();
        if left == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(left, 0, "the unstored response's session is gone");
}

async fn a_compaction_is_sealed_for_its_tenant_and_opens_only_untouched(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push_summary(Reply::text("Ada asked about order 4711."));
    let history = json!([
        {"role": "user", "content": "I am Ada"},
        {"role": "assistant", "content": "Hello Ada"},
    ]);
    let compacted = t
        .app
        .post("/v1/responses/compact", json!({"model": "gpt-4.1", "input": history}))
        .await
        .expect(StatusCode::OK);
    let output = compacted["output"].as_array().unwrap();
    assert_eq!(output.len(), 2, "the user message, then the compaction: {compacted}");
    let sealed = output[1]["encrypted_content"].as_str().unwrap();
    assert!(!sealed.contains("4711"), "the summary never shows in clear");
    t.llm.push(Reply::text("ok"));
    create(&t, json!({"input": [output[1], {"role": "user", "content": "and?"}]})).await;
    assert!(last_prompt(&t)[0].ends_with("Ada asked about order 4711."), "{:?}", last_prompt(&t));
    let mut forged = output[1].clone();
    let flipped = if sealed.ends_with('A') { 'B' } else { 'A' };
    forged["encrypted_content"] = format!("{}{flipped}", &sealed[..sealed.len() - 1]).into();
    let refused = t.app.post("/v1/responses", json!({"input": [forged]})).await;
    assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{}", refused.text);
    assert_eq!(refused.json()["error"]["param"], "input[0].encrypted_content");
}

/// What the document's request schemas constrain is refused by the handlers, each with
/// the field as `param`; an array query parameter may be repeated, others not.
async fn refusals_name_the_field_the_document_constrains(db: TestDb) {
    let t = RunsApp::new(db).await;
    let refusals = [
        ("/v1/conversations", json!({"items": "hello"}), "items"),
        ("/v1/responses", json!({"input": ""}), "input"),
        ("/v1/responses", json!({"input": [{"role": "user"}]}), "input[0].content"),
        (
            "/v1/responses",
            json!({"input": "x", "tools": [{"type": "function", "name": "a b"}]}),
            "tools[0].name",
        ),
        ("/v1/responses", json!({"input": "x", "text": {"verbosity": "loud"}}), "text.verbosity"),
        (
            "/v1/responses",
            json!({"input": "x", "max_tool_calls": 2147483648_u64}),
            "max_tool_calls",
        ),
        ("/v1/responses", json!({"input": "x", "prompt": {"id": "p"}}), "prompt"),
        ("/v1/responses", json!({"input": "x", "model": "gpt\u{1}"}), "model"),
        ("/v1/responses/compact", json!({"input": "x", "model": ""}), "model"),
        (
            "/v1/responses/compact",
            json!({"input": "x", "previous_response_id": "resp_1"}),
            "previous_response_id",
        ),
    ];
    for (path, body, param) in refusals {
        let refused = t.app.post(path, body.clone()).await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{body}: {}", refused.text);
        assert_eq!(refused.json()["error"]["param"], param, "{body}");
    }
    let wrong_type =
        t.app.post("/v1/responses", json!({"input": "x", "stream_options": [1]})).await;
    assert_eq!(wrong_type.status, StatusCode::BAD_REQUEST, "{}", wrong_type.text);
    let hot = t.app.post("/v1/responses", json!({"input": "x", "temperature": "hot"})).await;
    assert_eq!(hot.json()["error"]["param"], "temperature", "{}", hot.text);
    let message = hot.json()["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains("\"hot\"") && !message.contains("line"), "{message}");
    let unknown = json!({"input": "x", "conversation": "conv_unknown"});
    let refused = t.app.post("/v1/responses", unknown).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND, "{}", refused.text);
    assert_eq!(refused.json()["error"]["code"], "conversation_not_found", "{}", refused.text);
    assert!(refused.json()["error"]["message"].as_str().unwrap().contains("conv_unknown"));
    let never_made = t.app.get("/v1/conversations/conv_unknown").await;
    assert_eq!(never_made.status, StatusCode::NOT_FOUND, "a run made no conversation");
    assert_eq!(never_made.json()["error"]["code"], "conversation_not_found");
    assert_eq!(t.llm.requests().len(), 0, "nothing refused reached the model");

    let conversation = t
        .app
        .post("/v1/conversations", json!({"items": [{"role": "user", "content": "hi"}]}))
        .await
        .expect(StatusCode::OK);
    let items = format!("/v1/conversations/{}/items", conversation["id"].as_str().unwrap());
    let page = t.app.get(&format!("{items}?include=a&include[]=b&include=c")).await;
    let item = &page.expect(StatusCode::OK)["data"][0]["id"];
    let read = t.app.get(&format!("{items}/{}?include=a&include=b", item.as_str().unwrap())).await;
    read.expect(StatusCode::OK);
    let repeated = t.app.get(&format!("{items}?limit=2&limit=3")).await;
    assert_eq!(repeated.json()["error"]["param"], "limit", "{}", repeated.text);
    let undeclared = t.app.get(&format!("{items}/{}?limit=2", item.as_str().unwrap())).await;
    assert_eq!(undeclared.json()["error"]["param"], "limit", "{}", undeclared.text);
}

/// A model `GET /v1/models` lists is retrievable, any other is OpenAI's 404; a request
/// no route takes answers OpenAI's clients (`x-stainless-*` headers) in their shape.
async fn models_and_unrouted_requests_answer_openai_clients(db: TestDb) {
    let t = RunsApp::configured(db, |config| config.llm_model = Some("vendor/m-1".into())).await;
    let listed = t.app.get("/v1/models").await.expect(StatusCode::OK);
    assert_eq!(listed["data"][0]["id"], "vendor/m-1", "{listed}");
    let model = t.app.get("/v1/models/vendor/m-1").await.expect(StatusCode::OK);
    assert_eq!((&model["id"], &model["object"]), (&json!("vendor/m-1"), &json!("model")));
    let unknown = t.app.get("/v1/models/gpt-unknown").await.expect(StatusCode::NOT_FOUND);
    assert_eq!(unknown["error"]["code"], "model_not_found", "{unknown}");
    assert!(unknown["error"]["message"].as_str().unwrap().contains("gpt-unknown"), "{unknown}");

    let unrouted = |headers: &[(&str, &str)]| {
        let mut request = Request::get("/v1/vector_stores");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(Body::empty()).unwrap()
    };
    let openai = t.app.send(unrouted(&[("x-stainless-lang", "python")])).await;
    let body = openai.expect(StatusCode::NOT_FOUND);
    assert_eq!(openai.header("content-type"), Some("application/json"));
    assert!(!body["error"]["message"].as_str().unwrap().is_empty(), "{body}");
    let other = t.app.send(unrouted(&[])).await;
    other.expect_problem(StatusCode::NOT_FOUND, "not_found");
}

/// `background` with `stream` streams at once; the events are there to resume after the
/// client's last one.
async fn a_background_stream_is_resumed_where_it_was_left(db: TestDb) {
    let t = RunsApp::new(db).await;
    t.llm.push(Reply::text("in the background"));
    let streamed = t
        .app
        .post("/v1/responses", json!({"input": "a", "background": true, "stream": true}))
        .await
        .text;
    assert!(streamed.contains("event: response.completed"), "{streamed}");
    let created = streamed.lines().find(|line| line.starts_with("data: ")).unwrap();
    let created: Value = serde_json::from_str(&created["data: ".len()..]).unwrap();
    assert_eq!(created["response"]["background"], true, "{created}");
    let id = created["response"]["id"].as_str().unwrap();
    let rest = t.app.get(&format!("/v1/responses/{id}?stream=true&starting_after=1")).await.text;
    let first = rest.lines().find(|line| line.starts_with("data: ")).unwrap();
    let first: Value = serde_json::from_str(&first["data: ".len()..]).unwrap();
    assert_eq!(first["sequence_number"], 2, "{rest}");
    assert!(rest.contains("event: response.completed"), "{rest}");
}

/// A `function_call_output` answers a call of the same input or of the conversation or
/// chain it continues; one that answers nothing is OpenAI's 400, and leaves no session.
async fn an_output_must_answer_a_call(db: TestDb) {
    let t = RunsApp::new(db).await;
    let tools = json!([{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]);
    let output =
        |call: &str| json!({"type": "function_call_output", "call_id": call, "output": "x"});
    let sessions = || async { t.app.get("/v1/sessions?limit=1000").await.expect(StatusCode::OK) };

    let before = sessions().await["data"].as_array().unwrap().len();
    let alone = t.app.post("/v1/responses", json!({"input": [output("call_9")]})).await;
    let refused = alone.expect(StatusCode::BAD_REQUEST);
    assert_eq!(refused["error"]["param"], "input[0].call_id", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("No tool call found for function call output with call_id call_9"));
    assert_eq!(sessions().await["data"].as_array().unwrap().len(), before);

    t.llm.push(Reply::tool_call("call_1", "lookup", "{}"));
    let called = create(&t, json!({"input": "look it up", "tools": tools})).await;
    let chained = |call: &str| json!({"input": [output(call)], "previous_response_id": called["id"], "tools": tools});
    let wrong = t.app.post("/v1/responses", chained("call_2")).await;
    wrong.expect(StatusCode::BAD_REQUEST);
    assert_eq!(sessions().await["data"].as_array().unwrap().len(), before + 1);
    t.llm.push(Reply::text("found"));
    assert_eq!(create(&t, chained("call_1")).await["status"], "completed");
    assert_eq!(last_prompt(&t).last().unwrap(), "x");

    // A call and its output in one input pair up; so do those of a conversation.
    let conversation = t.app.post("/v1/conversations", json!({})).await.expect(StatusCode::OK);
    let call =
        json!({"type": "function_call", "call_id": "call_3", "name": "lookup", "arguments": "{}"});
    t.llm.push(Reply::text("paired"));
    let paired = json!({"input": [call, output("call_3")], "conversation": conversation["id"]});
    assert_eq!(create(&t, paired).await["status"], "completed");
    t.llm.push(Reply::text("again"));
    let again = json!({"input": [output("call_3")], "conversation": conversation["id"]});
    assert_eq!(create(&t, again).await["status"], "completed");
    let unknown = json!({"input": [output("call_3")], "conversation": "conv_unknown"});
    t.app.post("/v1/responses", unknown).await.expect(StatusCode::NOT_FOUND);
}

/// The ids a response shows for its input and output are those of the conversation's
/// items, in the stream as in a read.
async fn a_responses_items_have_their_conversation_items_ids(db: TestDb) {
    let t = RunsApp::new(db).await;
    let conversation = t.app.post("/v1/conversations", json!({})).await.expect(StatusCode::OK);
    let id = conversation["id"].as_str().unwrap();
    t.llm.push(Reply::text("answered"));
    let body = json!({"input": "asked", "conversation": id, "stream": true});
    let streamed = t.app.post("/v1/responses", body).await.text;
    let done = streamed.lines().rev().find_map(|line| line.strip_prefix("data: ")).unwrap();
    let response: Value = serde_json::from_str(done).unwrap();
    let response = &response["response"];
    let output_id = response["output"][0]["id"].as_str().unwrap();
    assert!(streamed.contains(&format!(r#""item_id":"{output_id}""#)), "{streamed}");

    let items = t.app.get(&format!("/v1/conversations/{id}/items?order=asc")).await;
    let items = items.expect(StatusCode::OK);
    let listed: Vec<&str> =
        items["data"].as_array().unwrap().iter().map(|i| i["id"].as_str().unwrap()).collect();
    let response_id = response["id"].as_str().unwrap();
    let inputs = t.app.get(&format!("/v1/responses/{response_id}/input_items")).await;
    let input_id = inputs.expect(StatusCode::OK)["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(listed, [input_id.as_str(), output_id]);
    let item = t.app.get(&format!("/v1/conversations/{id}/items/{output_id}")).await;
    assert_eq!(item.expect(StatusCode::OK)["content"][0]["text"], "answered");
    let read = t.app.get(&format!("/v1/responses/{response_id}")).await.expect(StatusCode::OK);
    assert_eq!(read["output"][0]["id"], output_id);
}

async fn a_busy_conversation_names_the_response_in_progress(db: TestDb) {
    let t = RunsApp::configured(db, |c| c.llm_idle_timeout_secs = 30).await;
    let conversation = t.app.post("/v1/conversations", json!({})).await.expect(StatusCode::OK);
    let conversation = conversation["id"].as_str().unwrap().to_owned();
    t.llm.push(Reply::HangMidStream);
    let first = json!({"input": "first", "conversation": conversation, "background": true});
    let active = create(&t, first).await;
    until_called(&t.llm, 1).await;
    let second = json!({"input": "second", "conversation": conversation, "if_busy": "reject"});
    let refused = t.app.post("/v1/responses", second).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    let error = &refused.json()["error"];
    assert_eq!(error["code"], "conversation_busy", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(active["id"].as_str().unwrap()), "{message}");
    assert!(message.contains(&conversation), "{message}");
}
