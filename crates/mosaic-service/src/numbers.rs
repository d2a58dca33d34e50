//! The integer range of client input.
//!
//! Everything the service hashes is canonical JSON, whose integers are at
//! most 2^53 - 1 ([`MAX_CANONICAL_INT`]). A client number beyond that range
//! could be decoded into a `u64` field, but then fails deep inside the
//! encoder (a receipt, a digest), after work was done. [`check_json_integers`]
//! refuses it while the body is still bytes, so every request type, nested
//! field and MCP tool argument gets the same `400 integer_out_of_range`.

use mosaic_harness::canonical::MAX_CANONICAL_INT;
use serde::Deserializer;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::error::{ServiceError, ServiceResult};

/// The stable code of a number outside `-(2^53 - 1) ..= 2^53 - 1`.
pub const INTEGER_OUT_OF_RANGE: &str = "integer_out_of_range";

/// Scans a JSON document and refuses any number whose magnitude exceeds
/// 2^53 - 1 (integers and floats alike: `1e300` is no integer either).
/// Malformed JSON passes through untouched: the typed decoder that runs
/// next classifies it.
pub fn check_json_integers(bytes: &[u8]) -> ServiceResult<()> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    match de.deserialize_any(Scan) {
        Err(e) if e.to_string().starts_with(INTEGER_OUT_OF_RANGE) => {
            let message = e.to_string();
            let message = message
                .split_once(" at line")
                .map_or(message.as_str(), |(m, _)| m);
            Err(ServiceError::bad_request(
                "integer_out_of_range",
                format!("{message}: integers must lie within ±(2^53-1) = ±{MAX_CANONICAL_INT}"),
            ))
        }
        _ => Ok(()),
    }
}

struct Scan;

fn out_of_range<E: de::Error>(shown: impl std::fmt::Display) -> E {
    E::custom(format!("{INTEGER_OUT_OF_RANGE}: number {shown}"))
}

impl<'de> de::Deserialize<'de> for Scan {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(Scan)
    }
}

impl<'de> Visitor<'de> for Scan {
    type Value = Scan;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Scan, E> {
        Ok(Scan)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scan, E> {
        if v.unsigned_abs() > MAX_CANONICAL_INT {
            return Err(out_of_range(v));
        }
        Ok(Scan)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scan, E> {
        if v > MAX_CANONICAL_INT {
            return Err(out_of_range(v));
        }
        Ok(Scan)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scan, E> {
        // Exact: 2^53 - 1 is representable, and so is every bound check.
        if !v.is_finite() || v.abs() > MAX_CANONICAL_INT as f64 {
            return Err(out_of_range(v));
        }
        Ok(Scan)
    }

    fn visit_str<E>(self, _: &str) -> Result<Scan, E> {
        Ok(Scan)
    }

    fn visit_unit<E>(self) -> Result<Scan, E> {
        Ok(Scan)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scan, A::Error> {
        while seq.next_element::<Scan>()?.is_some() {}
        Ok(Scan)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scan, A::Error> {
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value::<Scan>()?;
        }
        Ok(Scan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries() {
        for ok in [
            "9007199254740991",
            "-9007199254740991",
            "0",
            "1.5",
            "{\"a\":[1,{\"b\":9007199254740991}]}",
            "not json at all",
            "[1,2",
        ] {
            assert!(check_json_integers(ok.as_bytes()).is_ok(), "{ok}");
        }
        for bad in [
            "9007199254740992",
            "-9007199254740992",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "1e300",
            "{\"a\":[1,{\"b\":9007199254740992}]}",
            "{\"a\":1, \"b\": 18446744073709551615, \"c\": \"x\"}",
        ] {
            let err = check_json_integers(bad.as_bytes()).unwrap_err();
            assert_eq!(err.code(), INTEGER_OUT_OF_RANGE, "{bad}");
            assert_eq!(err.status(), 400);
        }
    }
}
