//! The steps of a migration computed in Rust over every tenant's rows: the
//! audit log's Merkle tree, the read scopes' commitments and their trees'
//! pages.

use crate::error::StoreResult;

/// The version whose migration introduces the read scopes' commitments:
/// the entries of records stored before it are computed in Rust, over
/// every tenant's records.
pub const SCOPE_COMMITMENTS_VERSION: i64 = 12;

/// Writes the scope entries, tree nodes and heads of every stored record.
pub(super) fn build_scope_commitments(tx: &mut postgres::Transaction<'_>) -> StoreResult<()> {
    const TABLES: [&str; 5] = [
        "records",
        "revocations",
        "scope_entries",
        "scope_nodes",
        "scope_heads",
    ];
    for table in TABLES {
        tx.batch_execute(&format!("ALTER TABLE {table} NO FORCE ROW LEVEL SECURITY"))?;
    }
    let rows: Vec<crate::ops::scope::BackfillRow> = tx
        .query(crate::ops::scope::BACKFILL_SQL, &[])?
        .iter()
        .map(|r| {
            Ok((
                r.try_get(0)?,
                r.try_get(1)?,
                r.try_get(2)?,
                r.try_get(3)?,
                r.try_get(4)?,
                r.try_get(5)?,
            ))
        })
        .collect::<Result<_, postgres::Error>>()?;
    let built = crate::ops::scope::backfill(rows.into_iter().map(Ok))?;
    let entry = tx.prepare(
        "INSERT INTO scope_entries (record_id, tenant_id, scope_type, scope_a, scope_b, bucket,
             record_sha256, state, entry_sha256)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )?;
    for (record_id, tenant, scope, bucket, record_sha256, state, entry_sha256) in &built.entries {
        let (st, a, b) = scope.columns();
        tx.execute(
            &entry,
            &[
                record_id,
                tenant,
                &st,
                &a,
                &b,
                &i64::from(*bucket),
                record_sha256,
                state,
                entry_sha256,
            ],
        )?;
    }
    let node = tx.prepare(
        "INSERT INTO scope_nodes (tenant_id, scope_type, scope_a, scope_b, level, idx, sha256)
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )?;
    for (tenant, scope, level, idx, sha256) in &built.nodes {
        let (st, a, b) = scope.columns();
        tx.execute(
            &node,
            &[
                tenant,
                &st,
                &a,
                &b,
                &i64::from(*level),
                &i64::from(*idx),
                sha256,
            ],
        )?;
    }
    let head = tx.prepare(
        "INSERT INTO scope_heads (tenant_id, scope_type, scope_a, scope_b, generation, root_sha256)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )?;
    for (tenant, scope, generation, root) in &built.heads {
        let (st, a, b) = scope.columns();
        tx.execute(
            &head,
            &[tenant, &st, &a, &b, &crate::ops::i(*generation)?, root],
        )?;
    }
    for table in TABLES {
        tx.batch_execute(&format!("ALTER TABLE {table} FORCE ROW LEVEL SECURITY"))?;
    }
    Ok(())
}

/// The version whose migration moves the scope trees' nodes into pages:
/// the pages are packed in Rust, over every tenant's nodes.
pub const SCOPE_PAGES_VERSION: i64 = 15;

/// Packs every stored node of `scope_nodes` into `scope_pages` and drops
/// `scope_nodes`.
pub(super) fn pack_scope_pages(tx: &mut postgres::Transaction<'_>) -> StoreResult<()> {
    tx.batch_execute(
        "ALTER TABLE scope_nodes NO FORCE ROW LEVEL SECURITY;
         ALTER TABLE scope_pages NO FORCE ROW LEVEL SECURITY;",
    )?;
    let nodes: Vec<crate::ops::scope::NodeRow> = tx
        .query(
            "SELECT tenant_id, scope_type, scope_a, scope_b, level, idx, sha256 FROM scope_nodes",
            &[],
        )?
        .iter()
        .map(|r| {
            Ok((
                r.try_get(0)?,
                r.try_get(1)?,
                r.try_get(2)?,
                r.try_get(3)?,
                r.try_get(4)?,
                r.try_get(5)?,
                r.try_get(6)?,
            ))
        })
        .collect::<Result<_, postgres::Error>>()?;
    let page = tx.prepare(
        "INSERT INTO scope_pages (tenant_id, scope_type, scope_a, scope_b, page, hashes)
         VALUES ($1, $2, $3, $4, $5, $6)",
    )?;
    for (tenant, st, a, b, at, hashes) in crate::ops::scope::pack_nodes(nodes)? {
        tx.execute(&page, &[&tenant, &st, &a, &b, &at, &hashes])?;
    }
    tx.batch_execute(
        "ALTER TABLE scope_pages FORCE ROW LEVEL SECURITY;
         DROP TABLE scope_nodes;",
    )?;
    Ok(())
}

/// The version whose migration makes the audit log a Merkle tree: the leaf
/// hashes of earlier events are computed in Rust, over every tenant's
/// events.
pub const AUDIT_TREE_VERSION: i64 = 10;

/// Writes the leaf hash of every stored audit event and the tree over them.
pub(super) fn build_audit_tree(tx: &mut postgres::Transaction<'_>) -> StoreResult<()> {
    tx.batch_execute("ALTER TABLE audit_events NO FORCE ROW LEVEL SECURITY")?;
    let raw: Vec<crate::ops::RawAuditEvent> = tx
        .query(
            "SELECT seq, at_ms, kind, tenant_id, ref_id, payload_json, prev_sha256
             FROM audit_events ORDER BY seq",
            &[],
        )?
        .iter()
        .map(|r| {
            Ok((
                r.try_get(0)?,
                r.try_get(1)?,
                r.try_get(2)?,
                r.try_get(3)?,
                r.try_get(4)?,
                r.try_get(5)?,
                r.try_get(6)?,
            ))
        })
        .collect::<Result<_, postgres::Error>>()?;
    let (leaves, tree) = crate::ops::rebuild_audit_tree(raw)?;
    let update = tx.prepare("UPDATE audit_events SET leaf_sha256 = $1 WHERE seq = $2")?;
    for (seq, leaf) in &leaves {
        tx.execute(&update, &[leaf, seq])?;
    }
    let size = crate::ops::i(tree.size())?;
    tx.execute(
        "UPDATE meta SET int_value = $1, text_value = $2 WHERE key = 'audit_tree'",
        &[&size, &crate::audit::encode_range(&tree)],
    )?;
    tx.batch_execute("ALTER TABLE audit_events FORCE ROW LEVEL SECURITY")?;
    Ok(())
}
