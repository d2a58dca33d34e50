//! A serde serializer that writes canonical JSON directly (see
//! [`crate::canonical`]), without building a `serde_json::Value` tree first.
//! Struct and map members are written into the output, remembered as byte
//! ranges, and re-emitted sorted by the UTF-16 code units of their names.

use std::borrow::Cow;
use std::cell::RefCell;

use serde::ser::{self, Serialize};

use crate::canonical::{CanonicalError, MAX_CANONICAL_INT, write_string};

impl ser::Error for CanonicalError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        CanonicalError::Serialize(msg.to_string())
    }
}

pub(crate) struct Canon<'a> {
    pub(crate) out: &'a mut Vec<u8>,
}

type R = Result<(), CanonicalError>;

fn int_u(out: &mut Vec<u8>, v: u64) -> R {
    if v > MAX_CANONICAL_INT {
        return Err(CanonicalError::NumberOutOfRange(v.to_string()));
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = v;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
    Ok(())
}

fn int_i(out: &mut Vec<u8>, v: i64) -> R {
    if v.unsigned_abs() > MAX_CANONICAL_INT {
        return Err(CanonicalError::NumberOutOfRange(v.to_string()));
    }
    out.extend_from_slice(v.to_string().as_bytes());
    Ok(())
}

/// Members written so far: (name, start, end) into `out` past `base`.
pub(crate) struct Members<'a> {
    out: &'a mut Vec<u8>,
    base: usize,
    members: Vec<(Cow<'static, str>, usize, usize)>,
    /// For variants: wrap the object as `{"variant": {...}}`.
    variant: Option<&'static str>,
    pending_key: Option<String>,
}

type MemberList = Vec<(Cow<'static, str>, usize, usize)>;

thread_local! {
    /// Member lists to reuse: structs nest, so several are in use at once.
    static MEMBER_LISTS: RefCell<Vec<MemberList>> = const { RefCell::new(Vec::new()) };
    /// The values of the struct being finished. Only one `finish` runs at a
    /// time on a thread (a nested struct finishes while its value is
    /// written, before its parent's `finish`), so one buffer serves all.
    static VALUES: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// UTF-16 code unit order of two member names; ASCII names compare as
/// their bytes do.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    if a.is_ascii() && b.is_ascii() {
        a.as_bytes().cmp(b.as_bytes())
    } else {
        a.encode_utf16().cmp(b.encode_utf16())
    }
}

impl<'a> Members<'a> {
    fn new(out: &'a mut Vec<u8>, variant: Option<&'static str>) -> Self {
        let base = out.len();
        let members = MEMBER_LISTS
            .with(|lists| lists.borrow_mut().pop())
            .unwrap_or_default();
        Members {
            out,
            base,
            members,
            variant,
            pending_key: None,
        }
    }

    fn member<T: Serialize + ?Sized>(&mut self, key: Cow<'static, str>, value: &T) -> R {
        let start = self.out.len();
        value.serialize(Canon { out: self.out })?;
        let end = self.out.len();
        self.members.push((key, start, end));
        Ok(())
    }

    fn finish(mut self) -> R {
        let result = VALUES.with(|values| {
            let mut region = values.borrow_mut();
            region.clear();
            region.extend_from_slice(&self.out[self.base..]);
            self.out.truncate(self.base);
            self.write_sorted(&region)
        });
        let mut members = std::mem::take(&mut self.members);
        members.clear();
        MEMBER_LISTS.with(|lists| lists.borrow_mut().push(members));
        result
    }

    /// Writes the members, sorted by name, with their values from `region`
    /// (the bytes written past `base`).
    fn write_sorted(&mut self, region: &[u8]) -> R {
        if !self
            .members
            .windows(2)
            .all(|w| utf16_order(&w[0].0, &w[1].0).is_lt())
        {
            self.members.sort_by(|a, b| utf16_order(&a.0, &b.0));
            if self.members.windows(2).any(|w| w[0].0 == w[1].0) {
                return Err(CanonicalError::Serialize("duplicate member name".into()));
            }
        }
        if let Some(variant) = self.variant {
            self.out.push(b'{');
            write_string(variant, self.out);
            self.out.push(b':');
        }
        self.out.push(b'{');
        for (idx, (key, start, end)) in self.members.iter().enumerate() {
            if idx > 0 {
                self.out.push(b',');
            }
            write_string(key, self.out);
            self.out.push(b':');
            self.out
                .extend_from_slice(&region[start - self.base..end - self.base]);
        }
        self.out.push(b'}');
        if self.variant.is_some() {
            self.out.push(b'}');
        }
        Ok(())
    }
}

pub(crate) struct Items<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    variant: Option<&'static str>,
}

impl Items<'_> {
    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> R {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        value.serialize(Canon { out: self.out })
    }

    fn finish(self) -> R {
        self.out.push(b']');
        if self.variant.is_some() {
            self.out.push(b'}');
        }
        Ok(())
    }
}

impl<'a> ser::Serializer for Canon<'a> {
    type Ok = ();
    type Error = CanonicalError;
    type SerializeSeq = Items<'a>;
    type SerializeTuple = Items<'a>;
    type SerializeTupleStruct = Items<'a>;
    type SerializeTupleVariant = Items<'a>;
    type SerializeMap = Members<'a>;
    type SerializeStruct = Members<'a>;
    type SerializeStructVariant = Members<'a>;

    fn serialize_bool(self, v: bool) -> R {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> R {
        int_i(self.out, v.into())
    }
    fn serialize_i16(self, v: i16) -> R {
        int_i(self.out, v.into())
    }
    fn serialize_i32(self, v: i32) -> R {
        int_i(self.out, v.into())
    }
    fn serialize_i64(self, v: i64) -> R {
        int_i(self.out, v)
    }
    fn serialize_u8(self, v: u8) -> R {
        int_u(self.out, v.into())
    }
    fn serialize_u16(self, v: u16) -> R {
        int_u(self.out, v.into())
    }
    fn serialize_u32(self, v: u32) -> R {
        int_u(self.out, v.into())
    }
    fn serialize_u64(self, v: u64) -> R {
        int_u(self.out, v)
    }
    fn serialize_f32(self, v: f32) -> R {
        Err(CanonicalError::NumberOutOfRange(v.to_string()))
    }
    fn serialize_f64(self, v: f64) -> R {
        Err(CanonicalError::NumberOutOfRange(v.to_string()))
    }
    fn serialize_char(self, v: char) -> R {
        let mut buf = [0u8; 4];
        write_string(v.encode_utf8(&mut buf), self.out);
        Ok(())
    }
    fn serialize_str(self, v: &str) -> R {
        write_string(v, self.out);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> R {
        let mut items = Items {
            out: self.out,
            first: true,
            variant: None,
        };
        items.out.push(b'[');
        for b in v {
            items.item(b)?;
        }
        items.finish()
    }
    fn serialize_none(self) -> R {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> R {
        value.serialize(self)
    }
    fn serialize_unit(self) -> R {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _name: &'static str) -> R {
        self.serialize_none()
    }
    fn serialize_unit_variant(self, _name: &'static str, _idx: u32, variant: &'static str) -> R {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _name: &'static str, value: &T) -> R {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _idx: u32,
        variant: &'static str,
        value: &T,
    ) -> R {
        let mut members = Members::new(self.out, None);
        members.member(Cow::Borrowed(variant), value)?;
        members.finish()
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Items<'a>, CanonicalError> {
        self.out.push(b'[');
        Ok(Items {
            out: self.out,
            first: true,
            variant: None,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Items<'a>, CanonicalError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<Items<'a>, CanonicalError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _idx: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Items<'a>, CanonicalError> {
        self.out.push(b'{');
        write_string(variant, self.out);
        self.out.extend_from_slice(b":[");
        Ok(Items {
            out: self.out,
            first: true,
            variant: Some(variant),
        })
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Members<'a>, CanonicalError> {
        Ok(Members::new(self.out, None))
    }
    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<Members<'a>, CanonicalError> {
        Ok(Members::new(self.out, None))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _idx: u32,
        variant: &'static str,
        _len: usize,
    ) -> Result<Members<'a>, CanonicalError> {
        Ok(Members::new(self.out, Some(variant)))
    }
}

macro_rules! items_impl {
    ($trait:ident, $method:ident) => {
        impl ser::$trait for Items<'_> {
            type Ok = ();
            type Error = CanonicalError;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> R {
                self.item(value)
            }
            fn end(self) -> R {
                self.finish()
            }
        }
    };
}
items_impl!(SerializeSeq, serialize_element);
items_impl!(SerializeTuple, serialize_element);
items_impl!(SerializeTupleStruct, serialize_field);
items_impl!(SerializeTupleVariant, serialize_field);

impl ser::SerializeMap for Members<'_> {
    type Ok = ();
    type Error = CanonicalError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> R {
        let value =
            serde_json::to_value(key).map_err(|e| CanonicalError::Serialize(e.to_string()))?;
        match value {
            serde_json::Value::String(s) => {
                self.pending_key = Some(s);
                Ok(())
            }
            other => Err(CanonicalError::Serialize(format!(
                "map key must be a string, found {other}"
            ))),
        }
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> R {
        let key = self
            .pending_key
            .take()
            .ok_or_else(|| CanonicalError::Serialize("map value without key".into()))?;
        self.member(Cow::Owned(key), value)
    }
    fn end(self) -> R {
        self.finish()
    }
}

impl ser::SerializeStruct for Members<'_> {
    type Ok = ();
    type Error = CanonicalError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> R {
        self.member(Cow::Borrowed(key), value)
    }
    fn end(self) -> R {
        self.finish()
    }
}

impl ser::SerializeStructVariant for Members<'_> {
    type Ok = ();
    type Error = CanonicalError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> R {
        self.member(Cow::Borrowed(key), value)
    }
    fn end(self) -> R {
        self.finish()
    }
}
