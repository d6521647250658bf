//! The closed word sets shared by the kernel and the wire: a macro that declares an enum of
//! exact wire words, read back tolerantly (a word this keel does not know, from an older or
//! newer peer, is kept as `Other` and written back unchanged). Pure data; the wire's own word
//! sets (`outcome`, dialog methods, …) are declared with it in `wire::events::words`.

/// Declares a word enum: unit variants with their exact wire words, plus `Other(String)` for a
/// word this keel does not know. Serialized as the word; read back from any string.
macro_rules! words {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $var:ident = $word:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $var,)*
            /// A word this keel does not know (a newer peer's), kept as it was written.
            Other(String),
        }

        impl $name {
            /// Every word this keel knows, in declaration order.
            pub const KNOWN: &'static [$name] = &[$($name::$var),*];

            /// The wire word.
            pub fn as_str(&self) -> &str {
                match self {
                    $($name::$var => $word,)*
                    $name::Other(word) => word,
                }
            }
        }

        impl From<&str> for $name {
            fn from(word: &str) -> Self {
                match word {
                    $($word => $name::$var,)*
                    _ => $name::Other(word.to_string()),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                d.deserialize_str($crate::kernel::words::WordVisitor(std::marker::PhantomData))
            }
        }
    };
}

/// Reads a word enum from a JSON string without allocating for the words it knows.
pub struct WordVisitor<T>(pub std::marker::PhantomData<T>);

impl<T: for<'w> From<&'w str>> serde::de::Visitor<'_> for WordVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        Ok(T::from(v))
    }
}

pub(crate) use words;
