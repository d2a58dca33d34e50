//! Golden vector for receipt signatures: a fixed test key signs a fixed
//! digest; Ed25519 is deterministic, so the documented bytes and the
//! signature below are what any implementation must produce (they were
//! computed with an independent Ed25519 implementation, and are repeated
//! in `docs/ENCODING.md`).

use ed25519_dalek::SigningKey;
use mosaic_harness::receipt_signature::{
    AuditTreeHeadFields, ReceiptKind, audit_tree_head_sha256, key_id, sign_receipt,
    sign_receipt_at, signing_bytes, signing_bytes_at, verify_receipt_signature,
};

/// The test key: secret bytes 0x00, 0x01, ..., 0x1f.
fn test_key() -> SigningKey {
    let mut secret = [0u8; 32];
    for (i, b) in secret.iter_mut().enumerate() {
        *b = u8::try_from(i).expect("small");
    }
    SigningKey::from_bytes(&secret)
}

/// SHA-256 of the empty string, standing in for a receipt digest.
const DIGEST: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const PUBLIC_KEY_HEX: &str = "03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8";
const KEY_ID: &str = "rk-56475aa75463474c0285df5dbf2bcab7";
const SIGNED_BYTES: &str = "mosaic.receipt.signature.v1\n{\"key_id\":\"rk-56475aa75463474c0285df5dbf2bcab7\",\"kind\":\"selection\",\"receipt_sha256\":\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\"}";
const SIGNATURE_HEX: &str = "c263acf9812883151cda126ca531e50acfbf50e1c27ac2e3665211b6d5d3eb971ea8797616ce64400e2a9e8d54d86aacad77eb4f68dfc8328f4c70bc62a05904";

#[test]
fn the_fixed_test_key_gives_the_documented_signature() {
    let key = test_key();
    assert_eq!(hex::encode(key.verifying_key().as_bytes()), PUBLIC_KEY_HEX);
    assert_eq!(key_id(&key.verifying_key()), KEY_ID);
    let bytes = signing_bytes(ReceiptKind::Selection, KEY_ID, DIGEST).expect("bytes");
    assert_eq!(String::from_utf8(bytes).expect("utf-8"), SIGNED_BYTES);
    let signature = sign_receipt(&key, ReceiptKind::Selection, DIGEST).expect("signs");
    assert_eq!(signature.key_id, KEY_ID);
    assert_eq!(signature.receipt_sha256, DIGEST);
    assert_eq!(signature.signature_hex, SIGNATURE_HEX);
    assert_eq!(
        verify_receipt_signature(
            &signature,
            ReceiptKind::Selection,
            DIGEST,
            &[key.verifying_key()]
        ),
        Ok(())
    );
}

#[test]
fn the_audit_tree_head_digest_is_the_documented_one() {
    // The tree of the RFC 6962 reference leaves (see `merkle`): 8 leaves.
    let head = AuditTreeHeadFields {
        tree_size: 8,
        root_sha256: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
        timestamp_unix_ms: 1_700_000_000_000,
        chain_sha256: DIGEST,
    };
    assert_eq!(
        audit_tree_head_sha256(&head).expect("digest"),
        AUDIT_TREE_HEAD_SHA256
    );
    let signature =
        sign_receipt(&test_key(), ReceiptKind::AuditHead, AUDIT_TREE_HEAD_SHA256).expect("signs");
    assert_eq!(signature.signature_hex, AUDIT_TREE_HEAD_SIGNATURE_HEX);
}

const AUDIT_TREE_HEAD_SHA256: &str =
    "ed8c2e75064635248bbab181e3ee83411911414a9d01bb2387cafa228b809fac";
const AUDIT_TREE_HEAD_SIGNATURE_HEX: &str = "add5f342d7c9a66c8e0f8a292eebf709536a8aa341277da26795c52fd4614e00bccac90ecbc4bca13f2c64e83c9308fe533d4dbf7b6fe4d54a70e6c0ffdbdb02";

/// A signature that tells its signing instant (`mosaic.receipt.signature.v2`).
#[test]
fn the_fixed_test_key_gives_the_documented_dated_signature() {
    let key = test_key();
    let bytes = signing_bytes_at(ReceiptKind::Write, KEY_ID, DIGEST, Some(1_700_000_000_000))
        .expect("bytes");
    assert_eq!(String::from_utf8(bytes).expect("utf-8"), DATED_SIGNED_BYTES);
    let signature =
        sign_receipt_at(&key, ReceiptKind::Write, DIGEST, 1_700_000_000_000).expect("signs");
    assert_eq!(signature.signature_hex, DATED_SIGNATURE_HEX);
    assert_eq!(
        verify_receipt_signature(
            &signature,
            ReceiptKind::Write,
            DIGEST,
            &[key.verifying_key()]
        ),
        Ok(())
    );
}

const DATED_SIGNED_BYTES: &str = "mosaic.receipt.signature.v2\n{\"key_id\":\"rk-56475aa75463474c0285df5dbf2bcab7\",\"kind\":\"write\",\"receipt_sha256\":\"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\",\"signed_at_unix_ms\":1700000000000}";
const DATED_SIGNATURE_HEX: &str = "455a9a3919e445b4e9b6a3609036204f40f66f3d4209e9ed668719e9c20f49a640fe0f67b1b92d642ee490295a7c3933f5c05bea3820d0df0a115f56c72a9c00";
