//! The table of `context.rs`, row by row.

use serde_json::json;

use super::*;

fn msg(role: &str, text: &str) -> Value {
    json!({"type": "message", "role": role, "content": text})
}
fn call(id: &str) -> Value {
    json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"})
}
fn out(id: &str, output: Value) -> Value {
    json!({"type": "function_call_output", "call_id": id, "output": output})
}
fn build(history: &[Value], current: &[Value]) -> Vec<Message> {
    build_messages(None, None, history, current, None).unwrap()
}
fn call_ids(m: &Message) -> Vec<&str> {
    m.tool_calls.iter().map(|c| c.id.as_str()).collect()
}
fn user(text: &str) -> Message {
    Message::text(Role::User, text)
}
/// The first character of each message: the tests' messages are numbered.
fn firsts(msgs: &[Message]) -> String {
    msgs.iter().filter_map(|m| m.content.as_deref()?.chars().next()).collect()
}

#[test]
fn messages_with_string_and_parts_content() {
    let parts = json!({"role": "user", "content": [
        {"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "x"},
        {"type": "text", "text": "b"}]});
    let refused = json!({"type": "message", "role": "assistant", "content": [
        {"type": "output_text", "text": "c"}, {"type": "refusal", "refusal": "no"}]});
    let msgs = build(&[msg("user", "hi"), parts, refused, msg("developer", "d")], &[]);
    assert_eq!(msgs[0], user("hi"));
    assert_eq!(msgs[1], user("a\nb"));
    assert_eq!(msgs[2], Message::text(Role::Assistant, "c\nno"));
    assert_eq!(msgs[3], Message::text(Role::System, "d"));
    assert_eq!(msgs.len(), 4);
}

#[test]
fn calls_and_outputs() {
    let parts = json!([{"type": "output_text", "text": "x"}, {"type": "text", "text": "y"}]);
    let (a, b) = (out("a", json!("ok")), out("b", parts));
    let msgs = build(&[call("a"), call("b"), a, b, call("c"), out("c", json!({"n": 1}))], &[]);
    assert_eq!(msgs.len(), 5);
    assert_eq!((msgs[0].role, call_ids(&msgs[0])), (Role::Assistant, vec!["a", "b"]));
    assert_eq!(msgs[0].tool_calls[0].function.name, "f");
    assert_eq!(msgs[1], Message::tool_output("a", "ok"));
    assert_eq!(msgs[2], Message::tool_output("b", "x\ny"));
    assert_eq!(call_ids(&msgs[3]), vec!["c"]);
    assert_eq!(msgs[4], Message::tool_output("c", r#"{"n":1}"#));
}

#[test]
fn orphans_are_left_out() {
    // An output before its call answers nothing, and the call then has no answer.
    let msgs = build(&[out("x", json!("s")), msg("user", "u"), call("x")], &[]);
    assert_eq!(msgs, vec![user("u")]);
    let msgs = build(&[call("y"), msg("user", "u")], &[out("z", json!("s"))]);
    assert_eq!(msgs, vec![user("u")]);
}

#[test]
fn call_in_history_answered_in_current_is_kept() {
    let msgs = build(&[call("a")], &[out("a", json!("r"))]);
    assert_eq!(call_ids(&msgs[0]), vec!["a"]);
    assert_eq!(msgs[1], Message::tool_output("a", "r"));
}

#[test]
fn unknown_and_malformed_items_are_skipped() {
    let reasoning = json!({"type": "reasoning", "summary": []});
    let junk = [
        reasoning.clone(),
        json!({"type": "custom", "role": "user", "content": "x"}),
        json!({"role": "critic", "content": "x"}),
        json!({"role": "user", "content": 3}),
        json!({"role": "user"}),
        json!({"role": "user", "content": [{"type": "input_image"}]}),
        json!({"type": "function_call", "call_id": "a", "name": "f", "arguments": {}}),
        json!({"type": "function_call_output", "call_id": 7, "output": "x"}),
        json!("text"),
    ];
    assert_eq!(build(&junk, &[]), vec![]);
    // A skipped item between two calls does not split them.
    let (a, b) = (out("a", json!("")), out("b", json!("")));
    assert_eq!(build(&[call("a"), reasoning, call("b"), a, b], &[]).len(), 3);
}

#[test]
fn instructions_come_first_when_non_empty() {
    let (history, current) = ([msg("user", "h")], [msg("user", "c")]);
    let msgs = build_messages(Some("be brief"), None, &history, &current, None).unwrap();
    assert_eq!(msgs[0], Message::text(Role::System, "be brief"));
    assert_eq!(firsts(&msgs), "bhc");
    for none in [None, Some("")] {
        let msgs = build_messages(none, None, &[], &current, None).unwrap();
        assert_eq!(msgs, vec![user("c")]);
    }
}

#[test]
fn a_compaction_item_brings_its_summary_as_a_system_message() {
    let compaction = json!({"type": "compaction", "summary": "they met", "encrypted_content": "x"});
    let msgs = build(&[compaction, json!({"type": "compaction"})], &[msg("user", "c")]);
    let summary = format!("{SUMMARY_HEADING}\n\nthey met");
    assert_eq!(msgs, vec![Message::text(Role::System, summary), user("c")]);
}

/// Ten messages of 4 + 10 = 14 tokens each, numbered.
fn ten() -> Vec<Value> {
    (0..10).map(|i| msg("user", &format!("{i}{}", "x".repeat(29)))).collect()
}

#[test]
fn budget_drops_the_oldest_history_first() {
    let (history, current) = (ten(), &ten()[..1]);
    let all = build_messages(None, None, &history, current, None).unwrap();
    assert_eq!(firsts(&all), "01234567890");
    let msgs = build_messages(None, None, &history, current, Some(14 * 4 + 13)).unwrap();
    assert_eq!(firsts(&msgs), "7890");
    // History dropped entirely, current kept.
    let msgs = build_messages(Some("i"), None, &history, &history[..2], Some(40)).unwrap();
    assert_eq!(firsts(&msgs), "i01");
}

#[test]
fn truncation_never_separates_a_call_from_its_output() {
    // The output of `a` sits after a message: per-message trimming could keep it alone.
    let (call, between) = (call("a"), msg("user", "2between"));
    let history = [msg("user", "1old"), call, between, out("a", json!("4")), msg("user", "5")];
    let mut kept = Vec::new();
    for budget in 0..=build(&history, &[]).iter().map(estimate_tokens).sum() {
        let msgs = build_messages(None, None, &history, &[], Some(budget)).unwrap();
        let calls = msgs.iter().position(|m| !m.tool_calls.is_empty());
        let outs = msgs.iter().position(|m| m.role == Role::Tool);
        assert!(calls.is_some() == outs.is_some() && calls <= outs, "{msgs:?}");
        kept.push(firsts(&msgs));
    }
    kept.dedup();
    assert_eq!(kept, ["", "5", "245", "1245"]);
}

#[test]
fn context_too_long_when_current_alone_exceeds() {
    let err = build_messages(Some("abc"), None, &[], &ten(), Some(100)).unwrap_err();
    assert_eq!((err.needed, err.budget), (5 + 140, 100));
    assert!(build_messages(Some("abc"), None, &[], &ten(), Some(145)).is_ok());
}

#[test]
fn estimate_grows_with_text() {
    let cost = |n: usize| estimate_tokens(&user(&"é".repeat(n)));
    assert!((0..50).all(|n| cost(n) <= cost(n + 1)));
    assert!(cost(30) > cost(0) + 15);
    let args =
        |a: &str| json!({"type": "function_call", "call_id": "c", "name": "f", "arguments": a});
    let calls = |a: &str| estimate_tokens(&build(&[args(a), out("c", json!(""))], &[])[0]);
    assert!(calls(&"x".repeat(30)) > calls(""));
}

#[test]
fn mcp_calls_and_rejected_approvals_are_calls_with_their_answers() {
    let made = json!({"type": "mcp_call", "id": "mcp_1", "server_label": "calc", "name": "x.add",
                      "arguments": "{\"a\":1}", "output": "2", "error": null, "status": "completed"});
    let failed = json!({"type": "mcp_call", "id": "mcp_2", "server_label": "calc", "name": "add",
                        "arguments": "{}", "output": null, "error": "down", "status": "failed"});
    let asked = |id: &str| {
        json!({"type": "mcp_approval_request", "id": id, "server_label": "calc",
                                  "name": "drop", "arguments": "{}"})
    };
    let decided = |id: &str, approve: bool| {
        json!({"type": "mcp_approval_response",
        "approval_request_id": id, "approve": approve, "reason": "no"})
    };
    let listed = json!({"type": "mcp_list_tools", "id": "l", "server_label": "calc", "tools": []});
    let history =
        [listed, made, failed, asked("r1"), decided("r1", false), asked("r2"), decided("r2", true)];
    let msgs = build(&history, &[]);
    assert_eq!(msgs.len(), 6, "{msgs:?}");
    assert_eq!(call_ids(&msgs[0]), vec!["mcp_1"]);
    assert_eq!(msgs[0].tool_calls[0].function.name, "x_add", "a function name");
    assert_eq!(msgs[1], Message::tool_output("mcp_1", "2"));
    assert_eq!(msgs[3], Message::tool_output("mcp_2", "error: down"));
    assert_eq!(call_ids(&msgs[4]), vec!["r1"]);
    assert_eq!(msgs[5], Message::tool_output("r1", r#"{"error":"rejected","reason":"no"}"#));
}
