//! Deserializers for counts. JSON Schema's `integer` includes numbers with a zero
//! fraction (`5.0`), and some clients serialize every number that way; serde's integer
//! types refuse them. These take any non-negative number without a fraction that fits
//! the field's type, and name the field when it does not.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, Unexpected, Visitor};

/// A count read through [`WholeVisitor`].
struct Whole<T>(T);

impl<'de, T: TryFrom<u64>> Deserialize<'de> for Whole<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let n = deserializer.deserialize_any(WholeVisitor(PhantomData::<T>))?;
        T::try_from(n).map(Whole).map_err(|_| {
            de::Error::invalid_value(Unexpected::Unsigned(n), &WholeVisitor(PhantomData::<T>))
        })
    }
}

struct WholeVisitor<T>(PhantomData<T>);

impl<T> Visitor<'_> for WholeVisitor<T> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let bits = std::mem::size_of::<T>() * 8;
        write!(f, "a whole number from 0 to 2^{bits}-1")
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Signed(v), &self))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        // 2^64 is the first float past u64::MAX.
        if v.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&v) {
            Ok(v as u64)
        } else {
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }
    }
}

/// A required count.
pub fn required<'de, D: Deserializer<'de>, T: TryFrom<u64>>(
    deserializer: D,
) -> Result<T, D::Error> {
    Whole::<T>::deserialize(deserializer).map(|w| w.0)
}

/// An optional count; `null` is `None`.
pub fn optional<'de, D: Deserializer<'de>, T: TryFrom<u64>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    Option::<Whole<T>>::deserialize(deserializer).map(|w| w.map(|w| w.0))
}

/// A count in a patch: left out is `None` (with `#[serde(default)]`), `null` is
/// `Some(None)`.
pub fn patch<'de, D: Deserializer<'de>, T: TryFrom<u64>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    optional(deserializer).map(Some)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Counts {
        #[serde(deserialize_with = "super::required")]
        a: u32,
        #[serde(default, deserialize_with = "super::optional")]
        b: Option<u64>,
        #[serde(default, deserialize_with = "super::patch")]
        c: Option<Option<u32>>,
    }

    fn parse(json: &str) -> Result<Counts, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn whole_floats_count_as_integers() {
        let counts = parse(r#"{"a": 5.0, "b": 7, "c": null}"#).unwrap();
        assert_eq!((counts.a, counts.b, counts.c), (5, Some(7), Some(None)));
        let counts = parse(r#"{"a": 1e3}"#).unwrap();
        assert_eq!((counts.a, counts.b, counts.c), (1000, None, None));
    }

    #[test]
    fn fractions_negatives_and_overflow_are_refused() {
        for json in [
            r#"{"a": 1.5}"#,
            r#"{"a": -1}"#,
            r#"{"a": -0.5}"#,
            r#"{"a": 4294967296}"#,
            r#"{"a": 1, "c": 4294967296.0}"#,
            r#"{"a": "1"}"#,
            r#"{"a": 1, "b": 1e300}"#,
        ] {
            let error = parse(json).expect_err(json);
            assert!(error.starts_with("invalid"), "{json}: {error}");
        }
    }
}
