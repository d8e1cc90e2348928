//! Lenient JSON leaves for the stream parsers: a value of an unexpected type reads as absent
//! instead of failing the whole chunk. Strings borrow from the input where they can.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use smallvec::SmallVec;

macro_rules! ignore_others {
    () => {
        fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            Deserialize::deserialize(d)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(Default::default())
        }
    };
}

/// A string, or `None` for anything else (null, numbers, objects, …).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct LStr<'a>(pub Option<Cow<'a, str>>);

impl<'a> LStr<'a> {
    pub(crate) fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for LStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = LStr<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(LStr(Some(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(LStr(Some(Cow::Owned(v.to_owned()))))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(LStr(Some(Cow::Owned(v))))
            }
            ignore_others!();
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// A non-negative integer (floats truncated, digit strings parsed), or `None`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LU64(pub Option<u64>);

impl<'de> Deserialize<'de> for LU64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LU64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(LU64(Some(v)))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(LU64(u64::try_from(v).ok()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(LU64((v.is_finite() && v >= 0.0).then_some(v as u64)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(LU64(v.trim().parse().ok()))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(LU64(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LU64(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LU64(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                LU64::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(LU64(None))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(LU64(None))
            }
        }
        d.deserialize_any(V)
    }
}

/// An object read as `T`, or `None` when the value is not an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LObj<T>(pub Option<T>);

impl<T> Default for LObj<T> {
    fn default() -> Self {
        LObj(None)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for LObj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = LObj<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(|t| LObj(Some(t)))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(LObj(None))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(LObj(None))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(LObj(None))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(LObj(None))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(LObj(None))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LObj(None))
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LObj(None))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                LObj::deserialize(d)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(LObj(None))
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// An array of `T`, or empty when the value is not an array (one element kept inline: a
/// chunk's `choices` has one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LSeq<T>(pub SmallVec<[T; 1]>);

impl<T> Default for LSeq<T> {
    fn default() -> Self {
        LSeq(SmallVec::new())
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for LSeq<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
            type Value = LSeq<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = SmallVec::new();
                while let Some(t) = seq.next_element::<T>()? {
                    out.push(t);
                }
                Ok(LSeq(out))
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(LSeq::default())
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(LSeq::default())
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(LSeq::default())
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(LSeq::default())
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(LSeq::default())
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LSeq::default())
            }
            fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(LSeq::default())
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
                LSeq::deserialize(d)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(LSeq::default())
            }
        }
        d.deserialize_any(V(PhantomData))
    }
}

/// Arguments of a tool call: a JSON string (its text) or any other JSON value (its raw text;
/// some servers send an object). `None` for null or absent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct LArgs<'a>(pub Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for LArgs<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: &'de serde_json::value::RawValue = Deserialize::deserialize(d)?;
        let text = raw.get();
        if text.starts_with('"') {
            let s: Cow<'de, str> = serde_json::from_str::<LStr<'de>>(text)
                .map_err(de::Error::custom)?
                .0
                .unwrap_or_default();
            Ok(LArgs(Some(s)))
        } else if text == "null" {
            Ok(LArgs(None))
        } else {
            Ok(LArgs(Some(Cow::Borrowed(text))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Default, Debug)]
    #[serde(default)]
    struct T<'a> {
        #[serde(borrow)]
        s: LStr<'a>,
        n: LU64,
        o: LObj<Inner>,
        v: LSeq<LU64>,
        #[serde(borrow)]
        a: LArgs<'a>,
    }

    #[derive(Deserialize, Default, Debug)]
    #[serde(default)]
    struct Inner {
        x: LU64,
    }

    #[test]
    fn wrong_types_read_as_absent() {
        let t: T = serde_json::from_str(r#"{"s":1,"n":"x","o":[1],"v":{"a":1},"a":null,"zz":{}}"#)
            .unwrap();
        assert_eq!(t.s.get(), None);
        assert_eq!(t.n.0, None);
        assert!(t.o.0.is_none());
        assert!(t.v.0.is_empty());
        assert_eq!(t.a.0, None);
    }

    #[test]
    fn right_types_read_and_borrow() {
        let text = r#"{"s":"hi","n":3.0,"o":{"x":"7"},"v":[1,-1,2],"a":"{\"k\":1}"}"#;
        let t: T = serde_json::from_str(text).unwrap();
        assert!(matches!(t.s.0, Some(Cow::Borrowed("hi"))));
        assert_eq!(t.n.0, Some(3));
        assert_eq!(t.o.0.unwrap().x.0, Some(7));
        assert_eq!(
            t.v.0.iter().map(|n| n.0).collect::<Vec<_>>(),
            [Some(1), None, Some(2)]
        );
        assert_eq!(t.a.0.as_deref(), Some("{\"k\":1}"));
        let t: T = serde_json::from_str(r#"{"a":{"k": 1}}"#).unwrap();
        assert_eq!(t.a.0.as_deref(), Some("{\"k\": 1}"));
    }
}
