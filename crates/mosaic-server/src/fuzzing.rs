//! Fuzz targets for every decoder of untrusted input, shared by the
//! `cargo fuzz` crate (`fuzz/`) and the bounded corpus test
//! (`tests/it/fuzz.rs`). Each function takes arbitrary bytes, runs the
//! decoder the service runs, and panics only when an invariant breaks:
//!
//! * [`request_body`]: every JSON API request type through
//!   [`crate::http::decode_json`]; a failure is a 4xx with a stable code,
//!   never `internal`.
//! * [`canonical`]: the strict decoders of the canonical types (records,
//!   receipts, manifests); what decodes encodes canonically (or is refused
//!   as out of range) and decodes back to itself.
//! * [`index_files`]: index snapshots, embedding files and journals, as a
//!   restart reads them; what decodes restores into empty indexes without
//!   a panic.
//! * [`mcp_message`]: MCP JSON-RPC messages as the transport decodes them,
//!   and tool arguments as the tools decode them.

use std::path::Path;
use std::sync::Arc;

use mosaic_harness::memory_scope::{MemorySelectionReceipt, RelevanceReceipt, SourceSetManifest};
use mosaic_harness::memory_write::MemoryWriteReceipt;
use mosaic_harness::{MemoryRecord, canonical::canonical_json};
use mosaic_index::vector::EmbeddingSnapshot;
use mosaic_index::{
    AnnConfig, HashEmbedder, IndexJournal, JournalHeader, LexicalIndex, TargetSnapshot,
    VectorIndex, apply_to_lexical, apply_to_vector,
};
use mosaic_store::DeletionReceiptBody;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::http::{Empty, decode_json};
use mosaic_service::api::*;
use mosaic_service::error::ServiceError;

/// The dimension of the hash embedder the index targets use.
const FUZZ_DIM: usize = 16;

fn check_error(what: &str, e: &ServiceError) {
    assert!(
        (400..500).contains(&e.status()) && e.code() != "internal",
        "{what}: client bytes gave {} {}: {e}",
        e.status(),
        e.code()
    );
}

fn body<T: DeserializeOwned>(what: &str, data: &[u8]) {
    if let Err(e) = decode_json::<T>(data) {
        check_error(what, &e);
    }
}

/// Every request body type of the JSON API.
pub fn request_body(data: &[u8]) {
    body::<ProposeRequest>("propose", data);
    body::<RecallRequest>("recall", data);
    body::<RevokeRequest>("revoke", data);
    body::<ConsentRequest>("consent", data);
    body::<VerifyRequest>("verify", data);
    body::<PolicyRequest>("policy", data);
    body::<CreateTenantRequest>("tenant", data);
    body::<GrantRequest>("grant", data);
    body::<CreateKeyRequest>("key", data);
    body::<ReviewActionRequest>("review", data);
    body::<RegisterVerifierRequest>("verifier", data);
    body::<Empty>("empty", data);
    // Import lines, one request per line.
    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.lines().take(16) {
            body::<ExportLine>("import line", line.as_bytes());
        }
    }
}

fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    what: &str,
    data: &[u8],
) {
    let Ok(value) = serde_json::from_slice::<T>(data) else {
        return;
    };
    // Out-of-range numbers are refused by the encoder, never wrapped.
    let Ok(bytes) = canonical_json(&value) else {
        return;
    };
    let again: T = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("{what}: canonical bytes do not decode: {e}"));
    assert_eq!(
        again, value,
        "{what}: canonical round trip changed the value"
    );
    let twice = canonical_json(&again)
        .unwrap_or_else(|e| panic!("{what}: canonical bytes do not encode again: {e}"));
    assert_eq!(twice, bytes, "{what}: canonical encoding is not stable");
}

/// The strict decoders of the canonical types.
pub fn canonical(data: &[u8]) {
    round_trip::<MemoryRecord>("record", data);
    round_trip::<MemoryWriteReceipt>("write receipt", data);
    round_trip::<MemorySelectionReceipt>("selection receipt", data);
    round_trip::<RelevanceReceipt>("relevance receipt", data);
    round_trip::<SourceSetManifest>("source-set manifest", data);
    round_trip::<DeletionReceiptBody>("deletion receipt", data);
}

fn vector_index() -> VectorIndex {
    VectorIndex::new(Arc::new(HashEmbedder::new(FUZZ_DIM)), AnnConfig::default())
}

/// Index snapshots, embedding files and journals. `scratch` is a directory
/// the journal files may be written in.
pub fn index_files(data: &[u8], scratch: &Path) {
    if let Ok(snapshot) = TargetSnapshot::from_bytes(data) {
        let _ = LexicalIndex::new().restore(&snapshot);
        let _ = vector_index().restore_with_embeddings(&snapshot, None);
    }
    if let Ok(embeddings) = EmbeddingSnapshot::from_bytes(data) {
        let _ =
            vector_index().restore_with_embeddings(&TargetSnapshot::default(), Some(&embeddings));
        assert!(
            embeddings.to_bytes().is_ok(),
            "a decoded embedding file encodes again"
        );
    }
    // A journal: the real header, then the bytes, as a restart reads it.
    let lexical = LexicalIndex::new();
    let vector = vector_index();
    for (name, header) in [
        ("lexical", JournalHeader::for_lexical(&lexical)),
        ("vector", JournalHeader::for_vector(&vector)),
    ] {
        let path = scratch.join(format!("{name}.journal"));
        let _ = std::fs::remove_file(&path);
        let prefix = match IndexJournal::open(&path, header.clone()) {
            Ok(journal) => {
                drop(journal);
                std::fs::read(&path).unwrap_or_default()
            }
            Err(_) => return,
        };
        let mut bytes = prefix;
        bytes.extend_from_slice(data);
        if std::fs::write(&path, &bytes).is_err() {
            return;
        }
        if let Ok((_journal, entries)) = IndexJournal::open(&path, header) {
            if name == "lexical" {
                let _ = apply_to_lexical(&mut LexicalIndex::new(), &entries);
            } else {
                let _ = apply_to_vector(&mut vector_index(), &entries);
            }
        }
        // Also the bytes alone, as a file that may not be a journal at all.
        if std::fs::write(&path, data).is_ok() {
            let lexical_header = JournalHeader::for_lexical(&lexical);
            let _ = IndexJournal::open(&path, lexical_header);
        }
        let _ = std::fs::remove_file(&path);
    }
}

/// MCP messages as the streamable-HTTP and stdio transports decode them,
/// and tool arguments as the tools decode them.
pub fn mcp_message(data: &[u8]) {
    let _ = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(data);
    if let Ok(serde_json::Value::Object(arguments)) = serde_json::from_slice(data)
        && let Ok(bytes) = serde_json::to_vec(&arguments)
    {
        body::<ProposeRequest>("remember arguments", &bytes);
        body::<RecallRequest>("recall arguments", &bytes);
    }
}
