//! The ids of the OpenAI routes: a response id is its run's, a conversation id is its
//! session's, and the items of a response are named after the response and their place
//! in it, so a stream, a later read and the conversation give an item the same id.

use uuid::Uuid;

use crate::model::{turn_item_id, TurnPart};

const RESPONSE: &str = "resp_";

/// `resp_` and the run's UUID in 32 hex digits.
pub fn response_id(run: Uuid) -> String {
    format!("{RESPONSE}{}", run.simple())
}

/// The run a response id names; none when the text is no response id.
pub fn run_of(response_id: &str) -> Option<Uuid> {
    let hex = response_id.strip_prefix(RESPONSE)?;
    (hex.len() == 32).then(|| Uuid::try_parse(hex).ok()).flatten()
}

/// The session a response without a conversation keeps its turn in: its own, named as
/// the response is.
pub fn own_session(run: Uuid) -> String {
    response_id(run)
}

/// A new conversation's id.
pub fn new_conversation() -> String {
    format!("conv_{}", Uuid::now_v7().simple())
}

/// The id of the item at `position` of a response's output: the one its conversation
/// item has once the turn is stored.
pub fn output_item(run: Uuid, position: usize) -> String {
    turn_item_id(run, TurnPart::Output, position).to_string()
}

/// The id of the item at `position` of a response's input, likewise.
pub fn input_item(run: Uuid, position: usize) -> String {
    turn_item_id(run, TurnPart::Input, position).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_id_names_its_run_and_nothing_else() {
        let run = Uuid::now_v7();
        assert_eq!(run_of(&response_id(run)), Some(run));
        assert_eq!(run_of(&run.to_string()), None);
        assert_eq!(run_of("resp_xyz"), None);
        assert_eq!(run_of(&format!("resp_{}", run.hyphenated())), None);
    }
}
