//! Signed evidence on the wire: an evidence item with an optional
//! registered verifier's signature beside its fields, decoded strictly (a
//! repeated member at any depth is an error).

use serde::{Deserialize, Serialize};

/// A registered verifier's Ed25519 signature over one evidence item.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvidenceSignature {
    /// The registered verifier (`vk-...`, from the admin API).
    pub verifier_id: String,
    /// Hex of the 64-byte Ed25519 signature over the 64 ASCII hex
    /// characters of the item's signed-evidence digest
    /// ([`crate::evidence::signed_evidence_digest`]).
    pub signature_hex: String,
}

/// An evidence item as sent: the item's own fields plus an optional
/// `signature` member. Unsigned items decode (so the server can refuse them
/// with `403 unverified_evidence` rather than a decoding error) but are
/// never used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signed<T> {
    /// The evidence item.
    pub item: T,
    /// Who vouches for it.
    pub signature: Option<EvidenceSignature>,
}

impl<T> Signed<T> {
    /// An item without a signature.
    pub fn unsigned(item: T) -> Self {
        Signed {
            item,
            signature: None,
        }
    }
}

/// The member of an evidence object that carries its signature.
pub const SIGNATURE_MEMBER: &str = "signature";

impl<T: Serialize> Serialize for Signed<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let mut value = serde_json::to_value(&self.item).map_err(S::Error::custom)?;
        if let Some(signature) = &self.signature {
            let serde_json::Value::Object(map) = &mut value else {
                return Err(S::Error::custom("an evidence item is not a JSON object"));
            };
            map.insert(
                SIGNATURE_MEMBER.to_owned(),
                serde_json::to_value(signature).map_err(S::Error::custom)?,
            );
        }
        value.serialize(serializer)
    }
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Signed<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let StrictValue(value) = StrictValue::deserialize(deserializer)?;
        let serde_json::Value::Object(mut map) = value else {
            return Err(D::Error::custom(
                "invalid type: expected an evidence object",
            ));
        };
        let signature = match map.remove(SIGNATURE_MEMBER) {
            None | Some(serde_json::Value::Null) => None,
            Some(v) => Some(serde_json::from_value(v).map_err(D::Error::custom)?),
        };
        let item =
            serde_json::from_value(serde_json::Value::Object(map)).map_err(D::Error::custom)?;
        Ok(Signed { item, signature })
    }
}

/// The schema of a signed evidence item: the item's own schema with the
/// optional `signature` member beside its fields.
impl<T: schemars::JsonSchema> schemars::JsonSchema for Signed<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("Signed{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = T::json_schema(generator);
        let signature = generator.subschema_for::<EvidenceSignature>().to_value();
        let object = schema.ensure_object();
        if let Some(serde_json::Value::Object(properties)) = object.get_mut("properties") {
            properties.insert(SIGNATURE_MEMBER.to_owned(), signature);
        }
        schema
    }
}

/// A JSON value decoded strictly: a repeated object member is an error at
/// every depth (`serde_json::Value` itself keeps the last one silently).
struct StrictValue(serde_json::Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = StrictValue;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<StrictValue, E> {
        Ok(StrictValue(v.into()))
    }

    fn visit_i64<E>(self, v: i64) -> Result<StrictValue, E> {
        Ok(StrictValue(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<StrictValue, E> {
        Ok(StrictValue(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<StrictValue, E> {
        Ok(StrictValue(
            serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into),
        ))
    }

    fn visit_str<E>(self, v: &str) -> Result<StrictValue, E> {
        Ok(StrictValue(v.into()))
    }

    fn visit_string<E>(self, v: String) -> Result<StrictValue, E> {
        Ok(StrictValue(v.into()))
    }

    fn visit_unit<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(serde_json::Value::Null))
    }

    fn visit_none<E>(self) -> Result<StrictValue, E> {
        Ok(StrictValue(serde_json::Value::Null))
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<StrictValue, D::Error> {
        StrictValue::deserialize(d)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<StrictValue, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(StrictValue(serde_json::Value::Array(items)))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<StrictValue, A::Error> {
        use serde::de::Error;
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let StrictValue(value) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(A::Error::custom(format!("duplicate field `{key}`")));
            }
            out.insert(key, value);
        }
        Ok(StrictValue(serde_json::Value::Object(out)))
    }
}
