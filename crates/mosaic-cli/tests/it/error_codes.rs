//! The stable error codes are listed once (`error_codes::ERROR_CODES`),
//! and that list, the codes the source sends, docs/ERRORS.md and the
//! OpenAPI document agree.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use mosaic_service::error_codes::{ERROR_CODES, markdown_table};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The string literal right after `needle` (whitespace allowed), when it
/// is a code (`[a-z_]+`), for every occurrence.
fn literals_after(text: &str, needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(needle) {
        rest = &rest[at + needle.len()..];
        let trimmed = rest.trim_start();
        if let Some(body) = trimmed.strip_prefix('"')
            && let Some(end) = body.find('"')
        {
            let literal = &body[..end];
            if !literal.is_empty() && literal.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
                out.push(literal.to_owned());
            }
        }
    }
    out
}

/// Every code the service, the transports and the binary send, with the
/// status its constructor implies.
fn sent_codes() -> BTreeMap<String, u16> {
    let mut files = Vec::new();
    for src in super::common::product_sources() {
        rust_files(&src, &mut files);
    }
    let mut codes = BTreeMap::new();
    for file in files {
        if file.ends_with("error_codes.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("read");
        for code in literals_after(&text, "bad_request(") {
            codes.insert(code, 400);
        }
        for code in literals_after(&text, "forbidden(") {
            codes.insert(code, 403);
        }
        // `Conflict { code: "..." }` (and the other struct forms).
        for (variant, status) in [
            ("Conflict {", 409),
            ("Forbidden {", 403),
            ("BadRequest {", 400),
        ] {
            let mut rest = text.as_str();
            while let Some(at) = rest.find(variant) {
                rest = &rest[at + variant.len()..];
                // Only the variant's own first member, before it closes.
                let (Some(member), Some(close)) = (rest.find("code:"), rest.find('}')) else {
                    continue;
                };
                if member < close {
                    let after = rest[member + "code:".len()..].trim_start();
                    if let Some(code) = literals_after(&format!("={after}"), "=").first()
                        && after.starts_with('"')
                    {
                        codes.insert(code.clone(), status);
                    }
                }
            }
        }
        if file.ends_with("error.rs") {
            // The fixed codes of `ServiceError::code`.
            let fixed = text
                .split("pub fn code(&self)")
                .nth(1)
                .and_then(|t| t.split("pub fn status(&self)").next())
                .expect("ServiceError::code");
            for code in literals_after(fixed, "=>") {
                codes.entry(code).or_insert(0);
            }
        }
    }
    codes
}

#[test]
fn every_code_the_source_sends_is_listed_once_with_its_status() {
    let listed: BTreeMap<&str, u16> = ERROR_CODES.iter().map(|e| (e.code, e.status)).collect();
    assert_eq!(listed.len(), ERROR_CODES.len(), "a code is listed twice");
    let sent = sent_codes();
    assert!(sent.len() > 40, "the scan finds the codes ({})", sent.len());
    let sent_names: BTreeSet<&str> = sent.keys().map(String::as_str).collect();
    let listed_names: BTreeSet<&str> = listed.keys().copied().collect();
    assert_eq!(
        sent_names.difference(&listed_names).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "codes the source sends but error_codes.rs does not list"
    );
    assert_eq!(
        listed_names.difference(&sent_names).collect::<Vec<_>>(),
        Vec::<&&str>::new(),
        "codes error_codes.rs lists but the source no longer sends"
    );
    for (code, status) in &sent {
        if *status != 0 {
            assert_eq!(listed[code.as_str()], *status, "{code}");
        }
    }
    for e in ERROR_CODES {
        assert!(
            !e.meaning.is_empty() && (400..600).contains(&e.status),
            "{}",
            e.code
        );
    }
}

#[test]
fn docs_and_the_openapi_document_show_the_same_list() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/ERRORS.md"))
            .expect("docs/ERRORS.md");
    assert!(
        docs.contains(&markdown_table()),
        "docs/ERRORS.md is not the generated table"
    );
    let doc = mosaic_server::openapi::document();
    assert_eq!(
        doc["x-error-codes"],
        serde_json::to_value(ERROR_CODES).expect("json")
    );
}
