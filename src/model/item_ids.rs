//! The ids a run's items are stored under, derived from the run and the item's place in
//! its input or output: a response and its stream name an item before the turn is
//! stored, and the conversation shows it under the same id afterwards.

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The list of a run an item is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnPart {
    Input,
    Output,
}

/// The id of the item at `position` of the run's `part`: a version 8 UUID made of a hash
/// of the three, unique as the run's id is.
pub fn turn_item_id(run: Uuid, part: TurnPart, position: usize) -> Uuid {
    let digest = Sha256::new()
        .chain_update(run.as_bytes())
        .chain_update([part as u8])
        .chain_update((position as u64).to_be_bytes())
        .finalize();
    let mut bytes = [0; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// The ids of a finished run's turn, in the order `turn` lists its items: the input, then
/// the output.
pub fn turn_item_ids(run: Uuid, inputs: usize, outputs: usize) -> Vec<Uuid> {
    let input = (0..inputs).map(|i| turn_item_id(run, TurnPart::Input, i));
    input.chain((0..outputs).map(|i| turn_item_id(run, TurnPart::Output, i))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_place_of_each_run_has_an_id_of_its_own() {
        let (a, b) = (Uuid::now_v7(), Uuid::now_v7());
        let ids = [
            turn_item_id(a, TurnPart::Input, 0),
            turn_item_id(a, TurnPart::Output, 0),
            turn_item_id(a, TurnPart::Output, 1),
            turn_item_id(b, TurnPart::Output, 0),
        ];
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len());
        assert_eq!(turn_item_id(a, TurnPart::Output, 1), ids[2]);
        assert_eq!(ids[0].get_version_num(), 8);
        assert_eq!(turn_item_ids(a, 1, 2), ids[..3]);
    }
}
