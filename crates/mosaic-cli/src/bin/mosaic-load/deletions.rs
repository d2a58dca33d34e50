//! Deletion propagation (`--deletions N`): propose, check, revoke and
//! time each memory until every index acknowledged its tombstone and a
//! recall no longer selects it.

use super::*;

/// What the deletion prober measured.
#[derive(Default)]
pub(super) struct DeletionResult {
    /// Revoke sent until every required index acknowledged the tombstone.
    pub(super) acknowledged: OpStats,
    /// Revoke sent until a recall on the last replica no longer selects it.
    pub(super) unrecallable: OpStats,
    /// Recalls on the last replica that still selected a memory after its
    /// revoke had answered.
    pub(super) selected_after_revoke: u64,
    /// Revokes answered 409 (a concurrent write won) and retried.
    pub(super) revoke_conflicts: u64,
    /// Their error codes.
    pub(super) conflict_codes: std::collections::BTreeSet<String>,
    pub(super) first_error: Option<String>,
}

impl DeletionResult {
    fn fail(&mut self, what: String) {
        self.acknowledged.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(what);
        }
    }
}

/// Whether a recall on `base` with `query` selects `record_id`.
pub(super) async fn selects(
    client: &HttpClient,
    base: &str,
    key: &str,
    query: &str,
    record_id: &str,
) -> Result<bool> {
    let body = json!({"query": query, "max_records": 10});
    let (status, body) = request(client, "POST", &format!("{base}/v1/recall"), key, &body).await?;
    if status != 200 {
        bail!("recall answered HTTP {status}");
    }
    Ok(body["selected_record_ids"]
        .as_array()
        .is_some_and(|ids| ids.iter().any(|id| id == record_id)))
}

/// Proposes, checks, revokes and times `count` memories one after another:
/// writes and revocations go to `writer`, recalls to `reader`.
pub(super) async fn run_deleter(
    client: HttpClient,
    writer: String,
    reader: String,
    principal: (String, String, String),
    count: usize,
) -> DeletionResult {
    let (key, principal_id, consent) = principal;
    let mut result = DeletionResult::default();
    const LIMIT: Duration = Duration::from_secs(30);
    for i in 0..count {
        let query = format!("deletion probe{i}x marker");
        let content = format!("{principal_id} deletion probe{i}x marker");
        let proposal = preference(
            &format!("deletion-{i}"),
            &principal_id,
            &content,
            Some(consent.clone()),
        );
        let Ok(body) = serde_json::to_value(&proposal) else {
            result.fail("cannot encode a proposal".into());
            continue;
        };
        let record_id = match request(
            &client,
            "POST",
            &format!("{writer}/v1/memories"),
            &key,
            &body,
        )
        .await
        {
            Ok((200, body)) if body["decision"] == "accepted" => {
                body["record_id"].as_str().unwrap_or_default().to_owned()
            }
            Ok((status, _)) => {
                result.fail(format!("probe proposal answered HTTP {status}"));
                continue;
            }
            Err(e) => {
                result.fail(format!("transport: {e}"));
                continue;
            }
        };
        // Recallable before the revocation (on the reader too).
        let seen = Instant::now();
        loop {
            match selects(&client, &reader, &key, &query, &record_id).await {
                Ok(true) => break,
                Ok(false) if seen.elapsed() < LIMIT => {}
                Ok(false) => {
                    result.fail("a probe never became recallable".into());
                    break;
                }
                Err(e) => {
                    result.fail(format!("{e}"));
                    break;
                }
            }
        }
        let revoke_url = format!("{writer}/v1/memories/{record_id}/revoke");
        let started = Instant::now();
        // A revoke that loses a write conflict (409) is retried, as a
        // client would; the time still runs from the first attempt.
        let mut attempts = 0;
        let stage = loop {
            attempts += 1;
            match request(&client, "POST", &revoke_url, &key, &json!({})).await {
                Ok((200, body)) => {
                    break Some(body["stage"].as_str().unwrap_or_default().to_owned());
                }
                Ok((409, body)) if attempts < 5 => {
                    result.revoke_conflicts += 1;
                    if let Some(code) = body["error"]["code"].as_str() {
                        result.conflict_codes.insert(code.to_owned());
                    }
                }
                Ok((status, body)) => {
                    let code = body["error"]["code"].as_str().unwrap_or("?");
                    result.fail(format!("revoke answered HTTP {status} {code}"));
                    break None;
                }
                Err(e) => {
                    result.fail(format!("transport: {e}"));
                    break None;
                }
            }
        };
        let Some(mut stage) = stage else {
            continue;
        };
        let acked = |stage: &str| matches!(stage, "indexes_acknowledged" | "erased" | "finalized");
        // The service drives the deletion on the request path; when an
        // index did not acknowledge in time the reconcile worker finishes
        // it, and the client polls for that.
        let status_url = format!("{writer}/v1/memories/{record_id}/deletion");
        while !acked(&stage) && started.elapsed() < LIMIT {
            tokio::time::sleep(Duration::from_millis(2)).await;
            if let Ok((200, body)) = request(&client, "GET", &status_url, &key, &Value::Null).await
            {
                stage = body["stage"].as_str().unwrap_or_default().to_owned();
            }
        }
        if acked(&stage) {
            result.acknowledged.latencies_us.push(micros(started));
        } else {
            result.fail("a deletion was not acknowledged within 30 s".into());
        }
        // Then the reader: the first recall after the revoke answered
        // should already miss it.
        loop {
            match selects(&client, &reader, &key, &query, &record_id).await {
                Ok(false) => {
                    result.unrecallable.latencies_us.push(micros(started));
                    break;
                }
                Ok(true) => {
                    result.selected_after_revoke += 1;
                    if started.elapsed() > LIMIT {
                        result.fail("a revoked memory stayed recallable for 30 s".into());
                        break;
                    }
                }
                Err(e) => {
                    result.fail(format!("{e}"));
                    break;
                }
            }
        }
    }
    result
}
