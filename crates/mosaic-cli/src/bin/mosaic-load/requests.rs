//! The HTTP calls of the load test: one JSON request, the tenant and
//! principals it provisions through the admin API, and the servers'
//! deletion histogram read from `/metrics`.

use super::*;

pub(super) type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub(super) async fn request(
    client: &HttpClient,
    method: &str,
    url: &str,
    key: &str,
    body: &Value,
) -> Result<(u16, Value)> {
    let request = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("authorization", format!("Bearer {key}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))?;
    let response = client.request(request).await?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    Ok((
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    ))
}

#[derive(Clone)]
pub(super) struct Principal {
    pub(super) key: String,
    pub(super) principal_id: String,
    pub(super) consent: String,
    /// How many notes its clients have proposed: each takes the next.
    pub(super) notes: Arc<AtomicU64>,
}

pub(super) async fn provision(
    client: &HttpClient,
    server: &Server,
    principals: usize,
) -> Result<(Vec<Principal>, bool)> {
    let admin = std::fs::read_to_string(server.data_dir.join("admin.key"))
        .context("cannot read the bootstrap admin key")?;
    let admin = admin.trim();
    let url = |path: &str| format!("{}{path}", server.url);
    let (status, body) = request(
        client,
        "POST",
        &url("/v1/admin/tenants"),
        admin,
        &json!({"tenant_id": TENANT}),
    )
    .await?;
    // 409 `tenant_exists`: a data directory kept by an earlier run.
    let reused = status == 409 && body["error"]["code"] == "tenant_exists";
    if status != 200 && !reused {
        bail!("creating the tenant answered {status}: {body}");
    }
    let mut out = Vec::with_capacity(principals);
    for i in 0..principals {
        let principal_id = format!("p{i:04}");
        let (status, body) = request(
            client,
            "POST",
            &url("/v1/admin/keys"),
            admin,
            &json!({"tenant_id": TENANT, "principal_id": principal_id}),
        )
        .await?;
        let key = match (status, body["key"].as_str()) {
            (200, Some(key)) => key.to_owned(),
            _ => bail!("creating a key answered {status}: {body}"),
        };
        let (status, body) = request(
            client,
            "POST",
            &url("/v1/consents"),
            &key,
            &json!({"purpose": "personalization", "ui_release": "load-ui-v1"}),
        )
        .await?;
        let consent = match (status, body["consent_sha256"].as_str()) {
            (200, Some(sha)) => sha.to_owned(),
            _ => bail!("giving consent answered {status}: {body}"),
        };
        out.push(Principal {
            key,
            principal_id,
            consent,
            notes: Arc::default(),
        });
    }
    Ok((out, reused))
}

/// The `mosaic_deletion_index_ack_seconds` histogram of one server:
/// (upper bound in seconds, cumulative count) pairs, then count and sum.
pub(super) async fn ack_histogram(client: &HttpClient, base: &str, admin: &str) -> Value {
    let request = hyper::Request::builder()
        .method("GET")
        .uri(format!("{base}/metrics"))
        .header("authorization", format!("Bearer {admin}"))
        .body(Full::new(Bytes::new()));
    let Ok(request) = request else {
        return Value::Null;
    };
    let Ok(response) = client.request(request).await else {
        return Value::Null;
    };
    let Ok(bytes) = response.into_body().collect().await else {
        return Value::Null;
    };
    let text = String::from_utf8_lossy(&bytes.to_bytes()).into_owned();
    let name = "mosaic_deletion_index_ack_seconds";
    let mut buckets = Vec::new();
    let (mut count, mut sum) = (0.0, 0.0);
    for line in text.lines().filter(|l| l.starts_with(name)) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let value: f64 = value.parse().unwrap_or(0.0);
        if let Some(le) = series
            .split("le=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
        {
            buckets.push(json!([le, value]));
        } else if series.ends_with("_count") {
            count = value;
        } else if series.ends_with("_sum") {
            sum = value;
        }
    }
    json!({"buckets": buckets, "count": count, "sum_s": sum,
           "mean_ms": if count > 0.0 { sum / count * 1000.0 } else { 0.0 }})
}
