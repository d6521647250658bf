//! A field of a typed view of JSON someone else wrote (a model's tool arguments, a settings
//! file's hooks, a session file's lines): read once into a `#[derive(Deserialize)]` struct whose fields are
//! [`Field`]s, so reading never fails and the code that uses a field says what is wrong with
//! it, in its own words and order. Pure; no I/O.

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// One field as it was written. A field of a `#[derive(Deserialize)]` view with
/// `#[serde(default)]`: reading it never fails, so what is wrong is said where it is used
/// (a tool's [`Field::required`] and [`Field::optional`], a hook's warnings).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Field<T> {
    /// Not sent.
    #[default]
    Absent,
    /// Sent as `null`.
    Null,
    /// Sent as something else than a `T`.
    Wrong,
    Given(T),
}

/// A type a [`Field`] holds, and how a message names it.
pub(crate) trait FieldType: DeserializeOwned {
    /// "a string", "a boolean", …: what a wrong value must be.
    const MUST_BE: &'static str;
    /// Whether `v` may be read as this type at all (a struct would also read an array).
    fn accepts(_v: &Value) -> bool {
        true
    }
}

impl FieldType for String {
    const MUST_BE: &'static str = "a string";
}

impl FieldType for bool {
    const MUST_BE: &'static str = "a boolean";
}

impl FieldType for u64 {
    const MUST_BE: &'static str = "a non-negative integer";
}

impl FieldType for f64 {
    const MUST_BE: &'static str = "a number";
}

impl<T: DeserializeOwned> FieldType for Vec<T> {
    const MUST_BE: &'static str = "an array";
    fn accepts(v: &Value) -> bool {
        v.is_array()
    }
}

impl<'de, T: FieldType> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::Null => Field::Null,
            v if !T::accepts(&v) => Field::Wrong,
            v => serde_json::from_value(v).map_or(Field::Wrong, Field::Given),
        })
    }
}

/// Any value, kept as written.
impl FieldType for Value {
    const MUST_BE: &'static str = "anything";
}

/// Any value: a field only asked whether it was sent.
impl FieldType for IgnoredAny {
    const MUST_BE: &'static str = "anything";
}

/// An object's entries in the order they were written (keys need not be known in advance).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Entries<V>(pub Vec<(String, V)>);

impl<V: DeserializeOwned> FieldType for Entries<V> {
    const MUST_BE: &'static str = "an object";
    fn accepts(v: &Value) -> bool {
        v.is_object()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Entries<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> serde::de::Visitor<'de> for Visit<V> {
            type Value = Entries<V>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(Visit(std::marker::PhantomData))
    }
}

impl<T: FieldType> Field<T> {
    /// The value if sent as a `T`; nothing said about anything else.
    pub(crate) fn given(self) -> Option<T> {
        match self {
            Field::Given(v) => Some(v),
            Field::Absent | Field::Null | Field::Wrong => None,
        }
    }

    /// Whether the field was sent at all (even as `null`).
    pub(crate) fn is_absent(&self) -> bool {
        matches!(self, Field::Absent)
    }
}

/// The typed view of `v`. Anything but an object reads as an empty one (each field absent, as
/// a lookup on it finds nothing; an array is not read as the struct's fields).
pub(crate) fn read<T: DeserializeOwned + Default>(v: &Value) -> T {
    if !v.is_object() {
        return T::default();
    }
    T::deserialize(v).unwrap_or_default()
}
