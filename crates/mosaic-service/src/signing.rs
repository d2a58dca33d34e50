//! The server's receipt-signing keys.
//!
//! One JSON key file holds every key the deployment has signed with: the
//! current one with its secret, the earlier ones (after `mosaic keys
//! rotate`) with their public half and the window they were current in, so
//! that receipts signed before a rotation still verify. The file is
//! `<data_dir>/signing-keys.json` unless `signing_key_file`
//! (`MOSAIC_SIGNING_KEY_FILE`) names another path; servers that share a
//! PostgreSQL database share one key file. It is created at first start with
//! mode 0600, and a file that group or others may read is refused. The secret
//! never leaves this module: not in a log, an error or a `Debug` rendering.
//!
//! What is signed, and how to check it without the server, is in
//! [`mosaic_harness::receipt_signature`] and `docs/ENCODING.md`.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ed25519_dalek::{SigningKey, VerifyingKey};
use mosaic_harness::receipt_signature::{
    ReceiptKind, ReceiptSignature, key_id, sign_receipt, sign_receipt_at,
};
use serde::{Deserialize, Serialize};

use crate::error::{ServiceError, ServiceResult};

/// The key file's name in the data directory.
pub const SIGNING_KEY_FILE: &str = "signing-keys.json";

/// The only algorithm.
pub const ALGORITHM: &str = "ed25519";

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    keys: Vec<StoredKey>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredKey {
    key_id: String,
    public_key_hex: String,
    /// Only the current key keeps its secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    secret_key_hex: Option<String>,
    valid_from_unix_ms: u64,
    #[serde(default)]
    valid_until_unix_ms: Option<u64>,
}

/// One public receipt-signing key.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishedKey {
    /// `rk-` and the first 32 hex digits of the SHA-256 of the public key.
    pub key_id: String,
    /// Always `ed25519`.
    pub algorithm: String,
    /// The 32 public-key bytes, lowercase hex.
    pub public_key_hex: String,
    /// When it became the signing key.
    pub valid_from_unix_ms: u64,
    /// When a rotation replaced it (`null` while current). Receipts it
    /// signed before then keep verifying.
    pub valid_until_unix_ms: Option<u64>,
}

/// The deployment's receipt-signing public keys (`GET /v1/keys`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KeysResponse {
    /// The key new receipts are signed with.
    pub current_key_id: String,
    /// Every key receipts may be signed with, oldest first.
    pub keys: Vec<PublishedKey>,
}

impl KeysResponse {
    /// The verifying keys, each checked against its id.
    pub fn verifying_keys(&self) -> Result<Vec<VerifyingKey>, String> {
        self.keys
            .iter()
            .map(|k| {
                if k.algorithm != ALGORITHM {
                    return Err(format!("key {} is not {ALGORITHM}", k.key_id));
                }
                let key = parse_public(&k.public_key_hex)
                    .ok_or_else(|| format!("key {} is not 32 bytes of hex", k.key_id))?;
                if key_id(&key) != k.key_id {
                    return Err(format!("key {} does not have that id", k.key_id));
                }
                Ok(key)
            })
            .collect()
    }
}

/// Parses public keys as the keys route or `mosaic doctor` gives them (a
/// JSON object with `keys`), or as lines of 64 hex digits.
pub fn parse_public_keys(text: &str) -> Result<Vec<VerifyingKey>, String> {
    parse_published_keys(text).map(|(keys, _)| keys)
}

/// [`parse_public_keys`], with the published keys' validity windows when
/// the text gives them (the JSON of the keys route or `mosaic doctor`;
/// lines of hex give none).
pub fn parse_published_keys(text: &str) -> Result<(Vec<VerifyingKey>, Vec<PublishedKey>), String> {
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        let value: serde_json::Value =
            serde_json::from_str(trimmed).map_err(|e| format!("keys JSON does not parse: {e}"))?;
        // `mosaic doctor --json` nests them under `signing_keys`, in its
        // line's `data`.
        let data = value.get("data").unwrap_or(&value);
        let keys = data.get("signing_keys").unwrap_or(data).clone();
        let keys: KeysResponse =
            serde_json::from_value(keys).map_err(|e| format!("keys JSON is not a key set: {e}"))?;
        return Ok((keys.verifying_keys()?, keys.keys));
    }
    let keys = trimmed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| parse_public(l).ok_or_else(|| "a key line is not 32 bytes of hex".to_owned()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((keys, Vec::new()))
}

/// When a receipt was signed, as far as its signed fields tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignedAt {
    /// At this instant (an audit tree head's `timestamp_unix_ms`: the
    /// server signs a head when it makes it).
    At(u64),
    /// At this instant or later (a deletion receipt's
    /// `finalized_at_unix_ms`: the receipt is signed whenever it is read,
    /// with the key current then).
    NotBefore(u64),
}

/// Why the key `key_id` could not have signed at `signed_at`, if it could
/// not: the instant lies outside the window the key was published with
/// (`[valid_from_unix_ms, valid_until_unix_ms)`, no end while current). A
/// key `windows` does not list has no known window: nothing to check here
/// (whether it is published at all is the signature check's question).
pub fn window_problem(
    key_id: &str,
    signed_at: SignedAt,
    windows: &[PublishedKey],
) -> Option<String> {
    let key = windows.iter().find(|k| k.key_id == key_id)?;
    let from = key.valid_from_unix_ms;
    match (signed_at, key.valid_until_unix_ms) {
        (SignedAt::At(at), _) if at < from => Some(format!(
            "signed at {at}, before key {key_id} became valid at {from}"
        )),
        (SignedAt::At(at), Some(until)) if at >= until => Some(format!(
            "signed at {at}, after key {key_id} was retired at {until}"
        )),
        (SignedAt::NotBefore(at), Some(until)) if at >= until => Some(format!(
            "made at {at}, after key {key_id} was retired at {until}: that key cannot have signed it"
        )),
        _ => None,
    }
}

fn parse_public(hex_text: &str) -> Option<VerifyingKey> {
    let bytes: [u8; 32] = hex::decode(hex_text).ok()?.try_into().ok()?;
    VerifyingKey::from_bytes(&bytes).ok()
}

/// The current signing key and the published set.
pub struct ReceiptSigner {
    /// The key it signs with: the key file's current key, followed when a
    /// rotation changes it (so no key signs after the window it is
    /// published with closed).
    key: std::sync::RwLock<SigningKey>,
    path: PathBuf,
    published: KeysResponse,
    /// The key set last read from the file, with the file's identity when
    /// it was read: read again only when that changed.
    cached: Mutex<Option<(FileStamp, KeysResponse)>>,
    /// Reads of the key file after loading (for tests).
    reads: AtomicU64,
}

/// What identifies one version of the key file: its modification time,
/// length and (on Unix) inode. A rotation writes a new file and renames it
/// over the old one, so the inode changes even within one tick of a coarse
/// clock.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FileStamp {
    modified: Option<std::time::SystemTime>,
    len: u64,
    inode: u64,
}

impl FileStamp {
    fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let inode = 0;
        Some(FileStamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode,
        })
    }
}

impl std::fmt::Debug for ReceiptSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiptSigner")
            .field("current_key_id", &self.published.current_key_id)
            .finish_non_exhaustive()
    }
}

fn key_error(path: &Path, what: impl std::fmt::Display) -> ServiceError {
    ServiceError::Internal(format!("signing key file {}: {what}", path.display()))
}

impl ReceiptSigner {
    /// Loads the key file at `path`, creating it with a fresh key (valid
    /// from `now_ms`) when it does not exist.
    pub fn load_or_create(path: &Path, now_ms: u64) -> ServiceResult<Self> {
        if !path.exists() {
            let file = KeyFile {
                keys: vec![fresh_key(now_ms)?],
            };
            write_key_file(path, &file, true)?;
        }
        Self::load(path)
    }

    /// Loads an existing key file.
    pub fn load(path: &Path) -> ServiceResult<Self> {
        let file = read_key_file(path)?;
        let current = current(&file).ok_or_else(|| key_error(path, "has no current key"))?;
        let key = current_signing_key(current)
            .ok_or_else(|| key_error(path, "the current key's secret is not 32 bytes of hex"))?;
        if key_id(&key.verifying_key()) != current.key_id
            || hex::encode(key.verifying_key().as_bytes()) != current.public_key_hex
        {
            return Err(key_error(
                path,
                "the current key's id or public key is wrong",
            ));
        }
        let published = published(&file);
        published
            .verifying_keys()
            .map_err(|problem| key_error(path, problem))?;
        Ok(ReceiptSigner {
            key: std::sync::RwLock::new(key),
            path: path.to_owned(),
            published,
            cached: Mutex::new(None),
            reads: AtomicU64::new(0),
        })
    }

    /// Signs a receipt's digest, with the key file's current key: after a
    /// rotation (seen by [`ReceiptSigner::keys`], which reads the file again
    /// only when it changed) with the new key at once, never with a key
    /// past the end of its published window.
    pub fn sign(&self, kind: ReceiptKind, receipt_sha256: &str) -> ServiceResult<ReceiptSignature> {
        Ok(sign_receipt(&self.current_key(), kind, receipt_sha256)?)
    }

    /// The key file's current key, after seeing a rotation (see
    /// [`ReceiptSigner::sign`]).
    fn current_key(&self) -> std::sync::RwLockReadGuard<'_, SigningKey> {
        self.with_keys(|_| ());
        match self.key.read() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// [`ReceiptSigner::sign`], telling in the signed bytes that it was
    /// signed at `now_ms` (`mosaic.receipt.signature.v2`): for the receipts
    /// whose body tells no signing instant (write, selection, relevance), so
    /// that a verifier checks the instant against the key's window.
    pub fn sign_at(
        &self,
        kind: ReceiptKind,
        receipt_sha256: &str,
        now_ms: u64,
    ) -> ServiceResult<ReceiptSignature> {
        Ok(sign_receipt_at(
            &self.current_key(),
            kind,
            receipt_sha256,
            now_ms,
        )?)
    }

    /// The public keys: read again from the key file whenever it changed
    /// (its modification time, length or inode; so a rotation made for the
    /// deployment is published by every server at once, and an unchanged
    /// file is not read again on every request), or the set loaded at
    /// start when the file cannot be read now.
    pub fn keys(&self) -> KeysResponse {
        self.with_keys(KeysResponse::clone)
    }

    /// `f` of [`ReceiptSigner::keys`]'s answer, without copying it (a
    /// signature only needs the rotation seen).
    fn with_keys<T>(&self, f: impl FnOnce(&KeysResponse) -> T) -> T {
        let stamp = FileStamp::of(&self.path);
        let mut cached = match self.cached.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let (Some(stamp), Some((kept, keys))) = (&stamp, cached.as_ref())
            && stamp == kept
        {
            return f(keys);
        }
        self.reads.fetch_add(1, Ordering::Relaxed);
        match read_key_file(&self.path) {
            Ok(file) if current(&file).is_some() => {
                self.follow(&file);
                let mut fresh = published(&file);
                // Keep a key this server still signs with published even if
                // the file lost it.
                let signing = self.key_id();
                if !fresh.keys.iter().any(|k| k.key_id == signing) {
                    fresh.keys.extend(
                        self.published
                            .keys
                            .iter()
                            .filter(|k| k.key_id == signing)
                            .cloned(),
                    );
                }
                let answer = f(&fresh);
                *cached = stamp.map(|stamp| (stamp, fresh));
                answer
            }
            _ => {
                *cached = None;
                f(&self.published)
            }
        }
    }

    /// How many times [`ReceiptSigner::keys`] read the key file.
    pub fn key_file_reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The id of the key this server signs with.
    pub fn key_id(&self) -> String {
        let key = match self.key.read() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        key_id(&key.verifying_key())
    }

    /// Signs with `file`'s current key from now on when it is another key
    /// (a rotation); a current key whose secret does not match its id is
    /// not taken (the server goes on with the key it has).
    fn follow(&self, file: &KeyFile) {
        let Some(current) = current(file) else { return };
        if current.key_id == self.key_id() {
            return;
        }
        match current_signing_key(current) {
            Some(next) if key_id(&next.verifying_key()) == current.key_id => {
                let mut key = match self.key.write() {
                    Ok(guard) => guard,
                    Err(poisoned) => poisoned.into_inner(),
                };
                *key = next;
                tracing::info!(key_id = %current.key_id, "signing with the rotated key");
            }
            _ => tracing::warn!(
                key_id = %current.key_id,
                "the key file's current key does not match its id; signing with the earlier key"
            ),
        }
    }
}

/// The signing key of a stored key, from its secret.
fn current_signing_key(stored: &StoredKey) -> Option<SigningKey> {
    let secret = stored
        .secret_key_hex
        .as_deref()
        .and_then(|s| hex::decode(s).ok())
        .and_then(|b| <[u8; 32]>::try_from(b).ok())?;
    Some(SigningKey::from_bytes(&secret))
}

/// Makes a new key current in the key file at `path` (which must exist):
/// the previous key keeps its public half and is valid until `now_ms`, its
/// secret is dropped. Running servers sign with the new key from their
/// next signature on (they see the file changed); the previous key stays
/// published, so what it signed in its window keeps verifying.
pub fn rotate(path: &Path, now_ms: u64) -> ServiceResult<KeysResponse> {
    let mut file = read_key_file(path)?;
    for key in &mut file.keys {
        if key.valid_until_unix_ms.is_none() {
            key.valid_until_unix_ms = Some(now_ms);
        }
        key.secret_key_hex = None;
    }
    file.keys.push(fresh_key(now_ms)?);
    write_key_file(path, &file, false)?;
    Ok(published(&file))
}

fn current(file: &KeyFile) -> Option<&StoredKey> {
    file.keys
        .iter()
        .rev()
        .find(|k| k.valid_until_unix_ms.is_none() && k.secret_key_hex.is_some())
}

fn published(file: &KeyFile) -> KeysResponse {
    KeysResponse {
        current_key_id: current(file).map(|k| k.key_id.clone()).unwrap_or_default(),
        keys: file
            .keys
            .iter()
            .map(|k| PublishedKey {
                key_id: k.key_id.clone(),
                algorithm: ALGORITHM.to_owned(),
                public_key_hex: k.public_key_hex.clone(),
                valid_from_unix_ms: k.valid_from_unix_ms,
                valid_until_unix_ms: k.valid_until_unix_ms,
            })
            .collect(),
    }
}

fn fresh_key(now_ms: u64) -> ServiceResult<StoredKey> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)
        .map_err(|e| ServiceError::Internal(format!("random source failed: {e}")))?;
    let key = SigningKey::from_bytes(&secret);
    Ok(StoredKey {
        key_id: key_id(&key.verifying_key()),
        public_key_hex: hex::encode(key.verifying_key().as_bytes()),
        secret_key_hex: Some(hex::encode(secret)),
        valid_from_unix_ms: now_ms,
        valid_until_unix_ms: None,
    })
}

fn read_key_file(path: &Path) -> ServiceResult<KeyFile> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|e| key_error(path, e))?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(key_error(
                path,
                "group or others may access it (chmod 600 it)",
            ));
        }
    }
    let text = std::fs::read_to_string(path).map_err(|e| key_error(path, e))?;
    // The error names the position, never the text (it holds the secret).
    serde_json::from_str(&text).map_err(|e| {
        key_error(
            path,
            format!(
                "is not a key file (line {}, column {})",
                e.line(),
                e.column()
            ),
        )
    })
}

/// Writes the key file with mode 0600: a new file in place when `create`
/// (failing if another server created it meanwhile), else a temporary file
/// renamed over the old one, so a reader sees the old or the new file whole.
fn write_key_file(path: &Path, file: &KeyFile, create: bool) -> ServiceResult<()> {
    use std::io::Write;
    let text = serde_json::to_vec_pretty(file)
        .map_err(|e| ServiceError::Internal(format!("key file does not serialize: {e}")))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| key_error(path, e))?;
    }
    let target = if create {
        path.to_owned()
    } else {
        path.with_extension("json.new")
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut out = match options.open(&target) {
        Ok(out) => out,
        // Another server of the deployment created it first: use theirs.
        Err(e) if create && e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(key_error(&target, e)),
    };
    out.write_all(&text).map_err(|e| key_error(&target, e))?;
    out.sync_all().map_err(|e| key_error(&target, e))?;
    if !create {
        std::fs::rename(&target, path).map_err(|e| key_error(path, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mosaic_harness::receipt_signature::verify_receipt_signature;

    const DIGEST: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_key_file_is_created_private_and_a_rotation_keeps_old_receipts_verifying() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e:?}"));
        let path = dir.path().join("data").join(SIGNING_KEY_FILE);
        let first = ReceiptSigner::load_or_create(&path, 1_000)
            .unwrap_or_else(|e| panic!("created: {e:?}"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .unwrap_or_else(|e| panic!("meta: {e:?}"))
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(!format!("{first:?}").contains("secret"));
        let old = first
            .sign(ReceiptKind::Write, DIGEST)
            .unwrap_or_else(|e| panic!("signs: {e:?}"));
        // Loading again gives the same key.
        let again =
            ReceiptSigner::load_or_create(&path, 2_000).unwrap_or_else(|e| panic!("loads: {e:?}"));
        assert_eq!(again.key_id(), first.key_id());

        let keys = rotate(&path, 3_000).unwrap_or_else(|e| panic!("rotates: {e:?}"));
        assert_eq!(keys.keys.len(), 2);
        assert_eq!(keys.keys[0].valid_until_unix_ms, Some(3_000));
        assert_eq!(keys.keys[1].valid_from_unix_ms, 3_000);
        assert_ne!(keys.current_key_id, first.key_id());
        // The running server publishes the rotation at once (the file
        // read twice: at the first signature, and once changed)...
        assert_eq!(first.keys(), keys);
        assert_eq!(first.key_file_reads(), 2);
        // ...and signs with the new key at once: the retired key signs
        // nothing past the end of its window.
        assert_eq!(first.key_id(), keys.current_key_id);
        let new = first
            .sign(ReceiptKind::Write, DIGEST)
            .unwrap_or_else(|e| panic!("signs: {e:?}"));
        assert_eq!(new.key_id, keys.current_key_id);
        assert_ne!(new.key_id, old.key_id);
        assert_eq!(first.key_file_reads(), 2, "the file read once per change");
        // A server loading the file afterwards signs with it too.
        let second = ReceiptSigner::load(&path).unwrap_or_else(|e| panic!("loads: {e:?}"));
        assert_eq!(second.key_id(), keys.current_key_id);
        let public = keys
            .verifying_keys()
            .unwrap_or_else(|e| panic!("keys: {e:?}"));
        for sig in [&old, &new] {
            assert_eq!(
                verify_receipt_signature(sig, ReceiptKind::Write, DIGEST, &public),
                Ok(())
            );
        }
        // The retired secret is gone from the file.
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read: {e:?}"));
        assert_eq!(text.matches("secret_key_hex").count(), 1);
        // Without the previous key, the old receipt no longer verifies.
        assert!(verify_receipt_signature(&old, ReceiptKind::Write, DIGEST, &public[1..]).is_err());
        // The public keys parse as the route gives them and as hex lines.
        let json = serde_json::to_string(&keys).unwrap_or_else(|e| panic!("json: {e:?}"));
        assert_eq!(
            parse_public_keys(&json).unwrap_or_else(|e| panic!("parses: {e:?}")),
            public
        );
        let lines: String = keys
            .keys
            .iter()
            .map(|k| format!("{}\n", k.public_key_hex))
            .collect();
        assert_eq!(
            parse_public_keys(&lines).unwrap_or_else(|e| panic!("parses: {e:?}")),
            public
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_key_file_others_may_read_is_refused_without_showing_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e:?}"));
        let path = dir.path().join(SIGNING_KEY_FILE);
        ReceiptSigner::load_or_create(&path, 1).unwrap_or_else(|e| panic!("created: {e:?}"));
        let secret = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read: {e:?}"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .unwrap_or_else(|e| panic!("chmod: {e:?}"));
        let err = ReceiptSigner::load(&path).expect_err("refused").to_string();
        assert!(err.contains("group or others"), "{err}");
        // A corrupt file's error names no byte of it.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .unwrap_or_else(|e| panic!("chmod: {e:?}"));
        let corrupt = secret.replace("keys", "kexs");
        std::fs::write(&path, &corrupt).unwrap_or_else(|e| panic!("write: {e:?}"));
        let err = ReceiptSigner::load(&path).expect_err("refused").to_string();
        let value: serde_json::Value =
            serde_json::from_str(&secret).unwrap_or_else(|e| panic!("json: {e:?}"));
        let hex = value["keys"][0]["secret_key_hex"]
            .as_str()
            .unwrap_or_else(|| panic!("secret"));
        assert!(!err.contains(hex), "{err}");
        assert!(!err.contains(&hex[..16]), "{err}");
    }

    /// Layer: the signer. A key file whose current key's secret is not the
    /// key its id names (a file edited by hand, or half written) is not
    /// followed: the server goes on signing with the key it has.
    #[test]
    fn a_current_key_whose_secret_is_not_its_id_is_not_followed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e:?}"));
        let path = dir.path().join(SIGNING_KEY_FILE);
        let signer =
            ReceiptSigner::load_or_create(&path, 1_000).unwrap_or_else(|e| panic!("{e:?}"));
        let before = signer.key_id();
        rotate(&path, 2_000).unwrap_or_else(|e| panic!("rotates: {e:?}"));
        let mut file: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read: {e:?}")),
        )
        .unwrap_or_else(|e| panic!("json: {e:?}"));
        // The current key's id kept, its secret another key's.
        file["keys"][1]["secret_key_hex"] = serde_json::json!(hex::encode([5u8; 32]));
        let text = serde_json::to_vec(&file).unwrap_or_else(|e| panic!("json: {e:?}"));
        let file: KeyFile = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{e:?}"));
        write_key_file(&path, &file, false).unwrap_or_else(|e| panic!("write: {e:?}"));
        let signature = signer
            .sign(ReceiptKind::Write, DIGEST)
            .unwrap_or_else(|e| panic!("signs: {e:?}"));
        assert_eq!(signature.key_id, before);
        assert_eq!(signer.key_id(), before);
    }

    #[test]
    fn the_key_file_is_read_again_only_when_it_changed_and_a_rotation_shows_at_once() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e:?}"));
        let path = dir.path().join(SIGNING_KEY_FILE);
        let signer =
            ReceiptSigner::load_or_create(&path, 1_000).unwrap_or_else(|e| panic!("{e:?}"));
        let before = signer.keys();
        for _ in 0..5 {
            assert_eq!(signer.keys(), before);
        }
        assert_eq!(signer.key_file_reads(), 1, "an unchanged file is read once");
        // A rotation right after (same clock tick or not) is published by
        // the very next call.
        let rotated = rotate(&path, 2_000).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(signer.keys(), rotated);
        assert_eq!(rotated.keys.len(), 2);
        assert_eq!(signer.key_file_reads(), 2);
        assert_eq!(signer.keys(), rotated);
        assert_eq!(signer.key_file_reads(), 2);
        // A file that cannot be read falls back to the keys loaded at start,
        // and is read again once it is back.
        std::fs::rename(&path, dir.path().join("moved.json")).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(signer.keys(), before);
        std::fs::rename(dir.path().join("moved.json"), &path).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(signer.keys(), rotated);
    }

    #[test]
    fn a_key_set_whose_id_does_not_match_its_key_is_refused() {
        let key = SigningKey::from_bytes(&[3u8; 32]).verifying_key();
        let mut set = KeysResponse {
            current_key_id: key_id(&key),
            keys: vec![PublishedKey {
                key_id: key_id(&key),
                algorithm: ALGORITHM.into(),
                public_key_hex: hex::encode(key.as_bytes()),
                valid_from_unix_ms: 0,
                valid_until_unix_ms: None,
            }],
        };
        assert_eq!(set.verifying_keys(), Ok(vec![key]));
        set.keys[0].key_id = "rk-00000000000000000000000000000000".into();
        assert!(set.verifying_keys().is_err());
    }
}
