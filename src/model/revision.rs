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
        tag.strip_prefix('"')
            .and_then(|tag| tag.strip_suffix('"'))
            .and_then(|revision| revision.parse::<i64>().ok())
            .filter(|revision| *revision >= 0)
            .map(Self::Revision)
            .ok_or_else(|| {
                InvalidField::new("If-Match", "must be * or a revision in quotes, such as \"3\"")
            })
    }

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
