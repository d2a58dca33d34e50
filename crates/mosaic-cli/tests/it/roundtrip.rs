//! One real round trip over TCP on port 0.

use mosaic_service::examples::workspace_fact;
use serde_json::{Value, json};

use crate::common::world;

fn post(url: &str, key: &str, body: &Value) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent
        .post(url)
        .header("Authorization", &format!("Bearer {key}"))
        .header("Content-Type", "application/json")
        .send(body.to_string().as_bytes())
        .expect("request");
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().expect("body");
    (status, serde_json::from_str(&text).expect("json"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_server_on_port_zero_answers_propose_and_recall() {
    let w = world();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(axum::serve(listener, w.router.clone()).into_future());
    let key = w.principals[0].key.clone();
    let base = format!("http://{addr}");
    let (status, proposed, recalled, unauthenticated) = tokio::task::spawn_blocking(move || {
        let request = serde_json::to_value(workspace_fact(
            "rt",
            crate::common::WORKSPACE,
            "Round trips work over TCP",
        ))
        .expect("json");
        let (status, proposed) = post(&format!("{base}/v1/memories"), &key, &request);
        let (_, recalled) = post(
            &format!("{base}/v1/recall"),
            &key,
            &json!({"query": "round trips"}),
        );
        let (unauthenticated, _) = post(&format!("{base}/v1/recall"), "mk_bad", &json!({}));
        (status, proposed, recalled, unauthenticated)
    })
    .await
    .expect("client");
    server.abort();
    assert_eq!(status, 200, "{proposed}");
    assert_eq!(recalled["selected_record_ids"][0], proposed["record_id"]);
    assert_eq!(unauthenticated, 401);
}
