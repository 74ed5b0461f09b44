//! A session's revision as HTTP carries it: `ETag: "<revision>"` on reads and writes,
//! and `If-Match` on writes, which then happen only at the revision the writer read.

use super::InvalidField;

/// What `If-Match` asks of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfMatch {
    /// `*`: only that the session exists.
    Any,
    /// `"<revision>"`: that the session is at this revision.
    Revision(i64),
}

impl IfMatch {
    /// Reads the header's value: `*`, or one entity tag `"<revision>"` (a weak tag, `W/`,
    /// is the same revision: a revision names the whole state, never bytes).
    pub fn parse(value: &str) -> Result<Self, InvalidField> {
        let value = value.trim();
        if value == "*" {
            return Ok(Self::Any);
        }
        let tag = value.strip_prefix("W/").unwrap_or(value);
        let digits = tag.strip_prefix('"').and_then(|tag| tag.strip_suffix('"'));
        match digits {
            Some(digits) if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                // A tag too large for any revision names one that no session is at.
                Ok(Self::Revision(digits.parse().unwrap_or(Self::NO_REVISION)))
            }
            _ => Err(InvalidField::new(
                "If-Match",
                "must be * or a revision in quotes, such as \"3\"",
            )),
        }
    }

    /// What a tag of more digits than a revision can have asks for: no session is ever
    /// at a negative revision.
    const NO_REVISION: i64 = -1;

    /// Whether a session at `current` (none: absent) may be written.
    pub fn admits(self, current: Option<i64>) -> bool {
        match (self, current) {
            (_, None) => false,
            (Self::Any, Some(_)) => true,
            (Self::Revision(wanted), Some(current)) => wanted == current,
        }
    }
}

/// The `ETag` of a revision.
pub fn entity_tag(revision: i64) -> String {
    format!("\"{revision}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_star_a_tag_and_a_weak_tag() {
        assert_eq!(IfMatch::parse("*").unwrap(), IfMatch::Any);
        assert_eq!(IfMatch::parse("\"12\"").unwrap(), IfMatch::Revision(12));
        assert_eq!(IfMatch::parse("W/\"3\"").unwrap(), IfMatch::Revision(3));
        assert_eq!(IfMatch::parse(&entity_tag(7)).unwrap(), IfMatch::Revision(7));
    }

    #[test]
    fn a_tag_larger_than_any_revision_matches_none() {
        let huge = IfMatch::parse("\"48130271901900089494127763240\"").unwrap();
        assert!(!huge.admits(Some(i64::MAX)) && !huge.admits(Some(0)));
    }

    #[test]
    fn refuses_what_is_no_revision() {
        for bad in ["12", "\"x\"", "\"-1\"", "", "\"1\", \"2\""] {
            assert_eq!(IfMatch::parse(bad).unwrap_err().field, "If-Match", "{bad}");
        }
    }

    #[test]
    fn an_absent_session_meets_no_condition() {
        assert!(!IfMatch::Any.admits(None));
        assert!(IfMatch::Any.admits(Some(4)));
        assert!(IfMatch::Revision(4).admits(Some(4)));
        assert!(!IfMatch::Revision(3).admits(Some(4)));
    }
}
