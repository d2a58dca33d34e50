//! Canonical bytes and digests.
//!
//! Every digest in Mosaic Memory is `SHA-256(domain_tag || 0x0A || canonical_json)`:
//!
//! * `domain_tag` is an ASCII string naming the object and its encoding
//!   version, for example `mosaic.memory.read_context.v1`. Two objects of
//!   different kinds can therefore never share a digest even when their JSON
//!   happens to be identical.
//! * `0x0A` is one line-feed byte separating the tag from the body.
//! * `canonical_json` is the object's JSON in the RFC 8785 (JCS) canonical
//!   form restricted to the values this crate produces: object members sorted
//!   by the UTF-16 code units of their names, no insignificant whitespace,
//!   strings escaped as ECMAScript's `JSON.stringify` escapes them (`\"`, `\\`,
//!   `\b`, `\f`, `\n`, `\r`, `\t`, other control characters as lowercase
//!   `\u00xx`, everything else literal UTF-8), integers in plain decimal.
//!
//! Floating-point numbers never occur: scores are fixed-point integers. Every
//! integer is at most [`MAX_CANONICAL_INT`] (2^53 - 1) so that the RFC 8785
//! number form and the integer's decimal form agree; [`canonical_json`]
//! refuses anything else rather than hash a value other implementations would
//! read differently.
//!
//! The golden vectors in `tests/golden/` pin the bytes and digests of every
//! domain tag; an accidental encoding change fails those tests.

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::canonical_ser::Canon;

/// Largest integer allowed anywhere in canonical JSON: 2^53 - 1.
pub const MAX_CANONICAL_INT: u64 = (1u64 << 53) - 1;

/// A failure to produce canonical bytes. Callers treat it as an execution
/// error: the input cannot be hashed unambiguously.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CanonicalError {
    /// A number is fractional, negative beyond `i64`, or above 2^53 - 1.
    #[error("number {0} cannot be encoded canonically (integers up to 2^53-1 only)")]
    NumberOutOfRange(String),
    /// The value did not serialize to JSON.
    #[error("value does not serialize to JSON: {0}")]
    Serialize(String),
}

/// Serializes `value` to its canonical JSON bytes.
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CanonicalError> {
    let mut out = Vec::with_capacity(256);
    value.serialize(Canon { out: &mut out })?;
    Ok(out)
}

/// The full byte string a digest covers: `domain_tag || 0x0A || canonical_json`.
pub fn domain_bytes<T: Serialize + ?Sized>(
    domain_tag: &str,
    value: &T,
) -> Result<Vec<u8>, CanonicalError> {
    let body = canonical_json(value)?;
    let mut out = Vec::with_capacity(domain_tag.len() + 1 + body.len());
    out.extend_from_slice(domain_tag.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(&body);
    Ok(out)
}

/// `SHA-256(domain_tag || 0x0A || canonical_json(value))` as lowercase hex.
pub fn domain_digest<T: Serialize + ?Sized>(
    domain_tag: &str,
    value: &T,
) -> Result<String, CanonicalError> {
    Ok(sha256_hex(&domain_bytes(domain_tag, value)?))
}

/// The digest of a JSON array of `items`, exactly as
/// [`domain_digest`] over the whole slice would compute it, but streamed into
/// the hash one element at a time (large record sets never materialize as
/// one JSON tree).
pub fn domain_digest_seq<'a, T, I>(domain_tag: &str, items: I) -> Result<String, CanonicalError>
where
    T: Serialize + 'a,
    I: IntoIterator<Item = &'a T>,
{
    let mut hasher = Sha256::new();
    hasher.update(domain_tag.as_bytes());
    hasher.update(b"\n[");
    let mut buf = Vec::with_capacity(1024);
    for (idx, item) in items.into_iter().enumerate() {
        buf.clear();
        if idx > 0 {
            buf.push(b',');
        }
        item.serialize(Canon { out: &mut buf })?;
        hasher.update(&buf);
    }
    hasher.update(b"]");
    Ok(hex::encode(hasher.finalize()))
}

/// Lowercase hex SHA-256 of raw bytes (used for content digests, which cover
/// the exact stored bytes with no domain tag).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// True when `s` is exactly 64 lowercase hexadecimal characters.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Reference implementation over a `serde_json::Value` tree, kept to
/// cross-check the streaming serializer in tests.
#[cfg(test)]
fn write_value(value: &serde_json::Value, out: &mut Vec<u8>) -> Result<(), CanonicalError> {
    use serde_json::Value;
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                if u > MAX_CANONICAL_INT {
                    return Err(CanonicalError::NumberOutOfRange(n.to_string()));
                }
                out.extend_from_slice(u.to_string().as_bytes());
            } else if let Some(i) = n.as_i64() {
                if i.unsigned_abs() > MAX_CANONICAL_INT {
                    return Err(CanonicalError::NumberOutOfRange(n.to_string()));
                }
                out.extend_from_slice(i.to_string().as_bytes());
            } else {
                return Err(CanonicalError::NumberOutOfRange(n.to_string()));
            }
        }
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (idx, item) in items.iter().enumerate() {
                if idx > 0 {
                    out.push(b',');
                }
                write_value(item, out)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push(b'{');
            for (idx, (key, item)) in entries.into_iter().enumerate() {
                if idx > 0 {
                    out.push(b',');
                }
                write_string(key, out);
                out.push(b':');
                write_value(item, out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

pub(crate) fn write_string(s: &str, out: &mut Vec<u8>) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut run_start = 0;
    let mut idx = 0;
    while idx < bytes.len() {
        // Most strings (ids, digests, plain text) escape nothing: test 16
        // bytes at a time without branching per byte, and copy clean
        // blocks in the run.
        if let Some(block) = bytes.get(idx..idx + 16)
            && !block.iter().fold(false, |any, &b| any | needs_escape(b))
        {
            idx += 16;
            continue;
        }
        let byte = bytes[idx];
        idx += 1;
        // Only ASCII bytes are ever escaped; UTF-8 continuation and lead
        // bytes are >= 0x80 and are copied verbatim in runs.
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[run_start..idx - 1]);
        run_start = idx;
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0x0f)]);
        } else {
            out.extend_from_slice(escape);
        }
    }
    out.extend_from_slice(&bytes[run_start..]);
    out.push(b'"');
}

/// A byte JSON strings escape: a quote, a backslash or a control byte.
#[inline(always)]
fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The 16-byte fast path escapes exactly what JSON escapes, wherever
    /// the byte falls against the block boundary, beside multi-byte text.
    #[test]
    fn write_string_escapes_like_json_at_every_block_offset() {
        let mut checked = 0;
        for byte in 0u8..0x80 {
            let c = char::from(byte);
            for before in 0..40 {
                for tail in ["", "x", "é€", "\u{1F600}0123456789abcdef"] {
                    let s = format!("{}{c}{tail}{c}", "a".repeat(before));
                    let mut ours = Vec::new();
                    write_string(&s, &mut ours);
                    let reference = serde_json::to_string(&s).expect("a string serialises");
                    assert_eq!(
                        String::from_utf8(ours).expect("utf-8"),
                        reference,
                        "byte {byte:#04x} after {before} bytes"
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 128 * 40 * 4);
    }

    #[test]
    fn canonical_sorts_members_and_drops_whitespace() {
        let bytes = canonical_json(&json!({"b": [1, 2], "a": {"y": true, "x": null}})).unwrap();
        assert_eq!(bytes, br#"{"a":{"x":null,"y":true},"b":[1,2]}"#);
    }

    #[test]
    fn canonical_sorts_by_utf16_code_units() {
        // U+10000 is the surrogate pair D800 DC00, which sorts before U+E000
        // in UTF-16 although its UTF-8 bytes sort after.
        let bytes = canonical_json(&json!({"\u{e000}": 1, "\u{10000}": 2})).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"\u{10000}\":2,\"\u{e000}\":1}"
        );
    }

    #[test]
    fn canonical_escapes_like_ecmascript() {
        let bytes = canonical_json(&json!("a\"\\\u{08}\u{0c}\n\r\t\u{01}\u{1f}é</x>")).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "\"a\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001fé</x>\""
        );
    }

    #[test]
    fn canonical_rejects_unsafe_numbers() {
        assert!(canonical_json(&json!(MAX_CANONICAL_INT)).is_ok());
        assert!(matches!(
            canonical_json(&json!(MAX_CANONICAL_INT + 1)),
            Err(CanonicalError::NumberOutOfRange(_))
        ));
        assert!(canonical_json(&json!(1.5)).is_err());
        assert_eq!(canonical_json(&json!(-7)).unwrap(), b"-7");
    }

    #[test]
    fn domain_tag_separates_identical_bodies() {
        let a = domain_digest("mosaic.test.a.v1", &json!({"x": 1})).unwrap();
        let b = domain_digest("mosaic.test.b.v1", &json!({"x": 1})).unwrap();
        assert_ne!(a, b);
        assert!(is_sha256_hex(&a));
        assert_eq!(
            domain_bytes("t.v1", &json!([])).unwrap(),
            b"t.v1\n[]".to_vec()
        );
    }

    #[test]
    fn streamed_sequence_digest_equals_whole_array_digest() {
        let items = vec![json!({"b": 1, "a": "x"}), json!([true, null]), json!("\n")];
        let _: &Vec<serde_json::Value> = &items;
        assert_eq!(
            domain_digest_seq("t.v1", &items).unwrap(),
            domain_digest("t.v1", &items).unwrap()
        );
        let empty: Vec<serde_json::Value> = Vec::new();
        assert_eq!(
            domain_digest_seq("t.v1", &empty).unwrap(),
            domain_digest("t.v1", &empty).unwrap()
        );
    }

    fn arb_json() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            (0u64..=MAX_CANONICAL_INT).prop_map(serde_json::Value::from),
            (-(MAX_CANONICAL_INT as i64)..0).prop_map(serde_json::Value::from),
            any::<String>().prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                proptest::collection::btree_map(any::<String>(), inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn streaming_serializer_matches_reference(value in arb_json()) {
            let mut reference = Vec::new();
            write_value(&value, &mut reference).unwrap();
            proptest::prop_assert_eq!(canonical_json(&value).unwrap(), reference);
        }
    }

    #[test]
    fn streaming_serializer_matches_reference_on_records() {
        for (record, _) in crate::fixtures::scoped_selection_records() {
            let tree = serde_json::to_value(&record).unwrap();
            let mut reference = Vec::new();
            write_value(&tree, &mut reference).unwrap();
            assert_eq!(canonical_json(&record).unwrap(), reference);
        }
    }

    #[test]
    fn sha256_hex_shape() {
        assert!(is_sha256_hex(&sha256_hex(b"")));
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(!is_sha256_hex(&"A".repeat(64)));
        assert!(!is_sha256_hex(&"a".repeat(63)));
    }
}
