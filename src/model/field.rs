use std::fmt;

use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use utoipa::openapi::RefOr;
use utoipa::{PartialSchema, ToSchema};

/// A rejected input value, named by the field that carried it so a client can find it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidField {
    pub field: String,
    pub message: String,
}

impl InvalidField {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

impl fmt::Display for InvalidField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for InvalidField {}

/// The id alphabet of docs/api.md as a JSON Schema pattern. At least one character is not a
/// dot: URL clients rewrite the path segments `.` and `..`, so such ids could not be reached.
pub const IDENTIFIER_PATTERN: &str = "^[A-Za-z0-9_.:@-]*[A-Za-z0-9_:@-][A-Za-z0-9_.:@-]*$";

/// The schema of a client-chosen id (a session's, an agent's): 1 to 128 characters
/// matching [`IDENTIFIER_PATTERN`]. Request fields name it as their `value_type`.
pub struct Identifier;

impl PartialSchema for Identifier {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .min_length(Some(1))
            .max_length(Some(128))
            .pattern(Some(IDENTIFIER_PATTERN))
            .into()
    }
}

impl ToSchema for Identifier {}

/// Checks what the model may call a function (a tool's name, a server's label): 1 to 64
/// characters of `A-Za-z0-9_-`.
pub(crate) fn check_function_name(field: &str, name: &str) -> Result<(), InvalidField> {
    let name_ok = (1..=64).contains(&name.len())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !name_ok {
        return Err(InvalidField::new(
            field,
            "must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -",
        ));
    }
    Ok(())
}

/// Checks an identifier: 1–128 of `A-Za-z0-9_.:@-`, not only dots.
pub(crate) fn check_identifier(field: &str, value: &str) -> Result<(), InvalidField> {
    let valid_char =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '@' | '-');
    if value.is_empty() || value.len() > 128 || !value.chars().all(valid_char) {
        return Err(InvalidField::new(
            field,
            "must be 1 to 128 characters of A-Z, a-z, 0-9 and _ . : @ -",
        ));
    }
    if value.chars().all(|c| c == '.') {
        return Err(InvalidField::new(field, "must not consist of dots only"));
    }
    Ok(())
}

/// How deep JSON may nest: the parser's own limit, named so a client learns it.
const MAX_JSON_DEPTH: usize = 128;

/// A JSON parse error for people: the parser's "recursion limit exceeded" names the
/// limit it stands for, and a value of the wrong type or shape is named by its field
/// alone, without the parser's line and column, which point into the raw bytes.
pub fn json_error_message(error: &serde_json::Error) -> String {
    let mut text = error.to_string();
    if error.is_data() && error.line() > 0 {
        let position = format!(" at line {} column {}", error.line(), error.column());
        if text.ends_with(&position) {
            text.truncate(text.len() - position.len());
        }
    }
    match text.strip_prefix("recursion limit exceeded") {
        Some(position) => {
            format!("nests deeper than {MAX_JSON_DEPTH} levels, the limit{position}")
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_type_is_named_without_the_parsers_position() {
        let error = serde_json::from_str::<Vec<f64>>(r#"[1, "hot"]"#).unwrap_err();
        assert_eq!(json_error_message(&error), r#"invalid type: string "hot", expected f64"#);
        let error = serde_json::from_str::<Vec<f64>>("[1,").unwrap_err();
        assert!(json_error_message(&error).ends_with("at line 1 column 3"));
    }
}
