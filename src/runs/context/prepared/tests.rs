//! A history prepared in pieces gives the very bytes `build_messages` gives for the whole
//! of it, however its items arrive: for many generated histories, cut at every point.

use serde_json::{json, Value};

use super::super::build_messages;
use super::PreparedHistory;

/// A small deterministic generator: the same histories on every run.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Items of every kind the translation treats apart, with few call ids so that calls
/// wait, get answered late, are taken over by a later call of the same id, or never
/// answered.
fn item(rng: &mut Lcg, n: usize) -> Value {
    let id = ["a", "b", "c"][rng.below(3) as usize];
    match rng.below(9) {
        0 | 1 => json!({"role": "user", "content": format!("{n} question")}),
        2 => json!({"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": format!("{n} answer")}]}),
        3 | 4 => json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"}),
        5 | 6 => json!({"type": "function_call_output", "call_id": id, "output": format!("{n}")}),
        7 => json!({"type": "mcp_call", "id": format!("m{n}"), "name": "t", "arguments": "{}",
                    "output": "ok"}),
        _ => json!({"type": "reasoning", "summary": []}),
    }
}

fn bytes<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

#[test]
fn a_history_prepared_in_pieces_gives_the_messages_of_the_whole() {
    let mut rng = Lcg(7);
    let mut compared = 0;
    for round in 0..300 {
        let history: Vec<Value> = (0..rng.below(24) as usize).map(|n| item(&mut rng, n)).collect();
        let current: Vec<Value> =
            (0..rng.below(4) as usize).map(|n| item(&mut rng, 100 + n)).collect();
        let budget = [None, Some(30), Some(60), Some(200)][rng.below(4) as usize];
        let instructions = (round % 2 == 0).then_some("be brief");
        let whole = build_messages(instructions, Some("s"), &history, &current, budget);
        for cut in 0..=history.len() {
            let mut prepared = PreparedHistory::default();
            prepared.extend(history[..cut].iter().cloned());
            prepared.extend(history[cut..].iter().cloned());
            let pieces = prepared.messages(instructions, Some("s"), &current, budget);
            match (&whole, &pieces) {
                (Ok(whole), Ok(pieces)) => assert_eq!(bytes(whole), bytes(pieces), "{history:?}"),
                (Err(whole), Err(pieces)) => assert_eq!(whole, pieces),
                _ => panic!("one failed: {whole:?} / {pieces:?} for {history:?}"),
            }
            compared += 1;
        }
    }
    assert!(compared > 3000, "{compared}");
}

#[test]
fn settled_messages_are_made_once_and_a_waiting_call_holds_what_follows() {
    let mut prepared = PreparedHistory::default();
    let call = json!({"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"});
    let user = json!({"role": "user", "content": "hi"});
    prepared.extend([user.clone(), call, user.clone()]);
    assert_eq!((prepared.settled.len(), prepared.unsettled.len()), (1, 2));
    let output = json!({"type": "function_call_output", "call_id": "a", "output": "x"});
    prepared.extend([output]);
    assert_eq!((prepared.settled.len(), prepared.unsettled.len()), (4, 0));
    // A call whose id a later call took can no longer be answered: it settles.
    let (a1, a2) = (
        json!({"type": "function_call", "call_id": "b", "name": "f", "arguments": "1"}),
        json!({"type": "function_call", "call_id": "b", "name": "f", "arguments": "2"}),
    );
    prepared.extend([a1, a2, user]);
    assert_eq!((prepared.settled.len(), prepared.unsettled.len()), (4, 2));
}

#[test]
fn the_estimate_counts_what_a_call_without_a_budget_sends() {
    let mut prepared = PreparedHistory::default();
    let history: Vec<Value> = (0..40).map(|n| item(&mut Lcg(n), n as usize)).collect();
    prepared.extend(history.iter().cloned());
    let current = [json!({"role": "user", "content": "now"})];
    let messages = build_messages(Some("i"), None, &history, &current, None).unwrap();
    let expected: u64 = messages.iter().map(super::super::estimate_tokens).sum();
    assert_eq!(prepared.estimated_tokens(Some("i"), None, &current), expected);
}
