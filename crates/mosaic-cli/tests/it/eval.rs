//! `mosaic eval` on a tiny generated dataset, through a server it starts
//! and through a running one: the figures, the flaws it reports, splits,
//! left-out question turns, the exit codes and the malformed-input errors.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_mosaic");

fn mosaic(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("MOSAIC_EMBEDDER")
        .env_remove("MOSAIC_CONFIG")
        .env_remove("MOSAIC_DATA_DIR")
        .env_remove("MOSAIC_POSTGRES")
        .env_remove("MOSAIC_ADMIN_KEY")
        .output()
        .expect("run mosaic");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `(turn_id, speaker, text)`.
type TurnSpec<'a> = (&'a str, &'a str, &'a str);

fn conversation(id: &str, sessions: &[(&str, &[TurnSpec<'_>])]) -> Value {
    json!({
        "conversation_id": id,
        "speaker_a": "A",
        "speaker_b": "B",
        "sessions": sessions.iter().enumerate().map(|(i, (date, turns))| json!({
            "session_id": format!("S{}", i + 1),
            "date_time": date,
            "turns": turns.iter().map(|(turn_id, speaker, text)| json!({
                "turn_id": turn_id, "speaker": speaker, "text": text
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn question(conv: &str, id: &str, text: &str, category: u8, evidence: &[&str]) -> Value {
    question_in(conv, id, text, json!(category), evidence)
}

fn question_in(conv: &str, id: &str, text: &str, category: Value, evidence: &[&str]) -> Value {
    json!({
        "conversation_id": conv, "question_id": id, "question": text,
        "answer": "", "adversarial_answer": null, "category": category,
        "category_name": "", "evidence": evidence, "evidence_sessions": [],
    })
}

fn write_lines(path: &Path, lines: &[Value]) {
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(path, text).expect("write dataset");
}

/// 3 conversations, 12 turns, 6 questions: 4 scored (one per category
/// 1-4), one adversarial skipped, one with empty evidence excluded; one
/// evidence id names no turn.
fn dataset(dir: &Path) -> (PathBuf, PathBuf) {
    let conversations = vec![
        conversation(
            "conv-a",
            &[(
                "1:00 pm on 8 May, 2023",
                &[
                    (
                        "D1:1",
                        "Alice",
                        "I adopted a golden retriever puppy named Biscuit.",
                    ),
                    (
                        "D1:2",
                        "Bob",
                        "Lovely! My sister moved to Lisbon last spring.",
                    ),
                    ("D1:3", "Alice", "I am training for a marathon in October."),
                    ("D1:4", "Bob", "I started learning cello recently."),
                ],
            )],
        ),
        conversation(
            "conv-b",
            &[(
                "2:00 pm on 9 May, 2023",
                &[
                    ("D1:1", "Carol", "My favourite dessert is pistachio gelato."),
                    ("D1:2", "Dan", "I repaired an old bicycle with new brakes."),
                    (
                        "D1:3",
                        "Carol",
                        "We planted tomatoes and basil in our garden.",
                    ),
                    ("D1:4", "Dan", "My violin recital was cancelled."),
                ],
            )],
        ),
        conversation(
            "conv-c",
            &[
                (
                    "3:00 pm on 10 May, 2023",
                    &[
                        ("D1:1", "Erin", "I booked a flight to Reykjavik."),
                        ("D1:2", "Finn", "My laptop battery died during a meeting."),
                    ],
                ),
                (
                    "4:00 pm on 11 June, 2023",
                    &[
                        ("D2:1", "Erin", "The aurora was green and bright."),
                        ("D2:2", "Finn", "I bought a replacement charger."),
                    ],
                ),
            ],
        ),
    ];
    let questions = vec![
        question(
            "conv-a",
            "a-q1",
            "golden retriever puppy name?",
            4,
            &["D1:1"],
        ),
        question(
            "conv-b",
            "b-q1",
            "pistachio gelato dessert, tomatoes basil garden?",
            1,
            &["D1:1", "D1:3"],
        ),
        question(
            "conv-c",
            "c-q1",
            "aurora green bright?",
            2,
            &["D2:1", "D9:9"],
        ),
        question("conv-a", "a-q2", "sister Lisbon?", 3, &["D1:2"]),
        question("conv-b", "b-q2", "violin recital tomorrow?", 5, &["D1:4"]),
        question("conv-c", "c-q2", "laptop battery?", 4, &[]),
    ];
    let c = dir.join("conversations.jsonl");
    let q = dir.join("questions.jsonl");
    write_lines(&c, &conversations);
    write_lines(&q, &questions);
    (c, q)
}

fn lines_of(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect()
}

fn close(value: &Value, expected: f64) -> bool {
    value.as_f64().is_some_and(|v| (v - expected).abs() < 1e-4)
}

#[test]
fn eval_scores_a_tiny_dataset_through_the_product_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, q) = dataset(dir.path());
    let (c, q) = (c.to_str().expect("utf8"), q.to_str().expect("utf8"));
    let (code, stdout, stderr) = mosaic(&[
        "eval",
        c,
        q,
        "--embedder",
        "hash",
        "--modes",
        "lexical",
        "--json",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(stderr.is_empty(), "the progress bars are hidden: {stderr}");
    let lines = lines_of(&stdout);
    let dataset = &lines[0];
    assert_eq!(dataset["type"], "eval_dataset", "{stdout}");
    let d = &dataset["data"];
    assert_eq!(d["conversations"], 3);
    assert_eq!(d["ingest"], "sessions");
    assert_eq!(d["turns"], 12);
    assert_eq!(d["turns_rejected"], json!([]), "every turn passes the gate");
    assert_eq!(d["questions"], 6);
    assert_eq!(d["questions_scored"], 4);
    assert_eq!(d["questions_skipped_by_category"], 1);
    assert_eq!(d["categories_skipped"], json!([5]), "LoCoMo's adversarial");
    assert_eq!(d["categories_scored"], json!([1, 2, 3, 4]));
    assert_eq!(d["empty_evidence_excluded"], json!(["c-q2"]));
    assert_eq!(d["unknown_evidence_kept_as_misses"], json!(["c-q1 D9:9"]));
    let rows: Vec<&Value> = lines[1..]
        .iter()
        .filter(|l| l["type"] == "eval")
        .map(|l| &l["data"])
        .collect();
    assert_eq!(rows.len(), 5, "categories 1-4 and all: {stdout}");
    let row = |category: u64| {
        rows.iter()
            .find(|r| r["category"] == category)
            .unwrap_or_else(|| panic!("no category {category}: {stdout}"))
    };
    // (category, n, recall@1, recall@5, recall@10, nDCG@10)
    let ndcg_half = 1.0 / (1.0 + 1.0 / 3f64.log2());
    let expected = [
        (1, 1, 0.5, 1.0, 1.0, 1.0),
        (2, 1, 0.5, 0.5, 0.5, ndcg_half),
        (3, 1, 1.0, 1.0, 1.0, 1.0),
        (4, 1, 1.0, 1.0, 1.0, 1.0),
        (0, 4, 0.75, 0.875, 0.875, (3.0 + ndcg_half) / 4.0),
    ];
    for (category, n, r1, r5, r10, ndcg) in expected {
        let r = row(category);
        assert_eq!(r["mode"], "lexical");
        assert_eq!(r["n"], n, "{r}");
        assert!(close(&r["recall_at_1"], r1), "category {category}: {r}");
        assert!(close(&r["recall_at_5"], r5), "category {category}: {r}");
        assert!(close(&r["recall_at_10"], r10), "category {category}: {r}");
        assert!(close(&r["ndcg_at_10"], ndcg), "category {category}: {r}");
    }
    // Latency beside recall: one ingest call per session, one recall per
    // scored question and mode.
    let latency: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "eval_latency")
        .map(|l| &l["data"])
        .collect();
    assert_eq!(latency.len(), 2, "{stdout}");
    assert_eq!(latency[0]["stage"], "ingest");
    assert_eq!(latency[0]["n"], 4, "four sessions: {stdout}");
    assert!(latency[0]["per_second"].as_f64().is_some_and(|r| r > 0.0));
    assert_eq!(latency[1]["stage"], "recall");
    assert_eq!(latency[1]["mode"], "lexical");
    assert_eq!(latency[1]["n"], 4);
    for l in &latency {
        let (p50, p99, max) = (
            l["p50_ms"].as_f64().unwrap_or(-1.0),
            l["p99_ms"].as_f64().unwrap_or(-1.0),
            l["max_ms"].as_f64().unwrap_or(-1.0),
        );
        assert!(0.0 < p50 && p50 <= p99 && p99 <= max, "{l}");
    }
    // Neither memory ids nor memory content are printed.
    for needle in ["\"m-", " m-", "Biscuit", "pistachio"] {
        assert!(
            !stdout.contains(needle) && !stderr.contains(needle),
            "{needle} printed"
        );
    }

    // Every mode, as a human table.
    let (code, stdout, stderr) = mosaic(&["eval", c, q, "--embedder", "hash"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("| lexical | all | 4 | 0.750 | 0.875 | 0.875 |"),
        "{stdout}"
    );
    for mode in ["lexical", "vector", "hybrid"] {
        assert_eq!(
            stdout.matches(&format!("| {mode} |")).count(),
            5,
            "{mode}: {stdout}"
        );
    }
    assert!(
        stdout.contains("c-q2") && stdout.contains("c-q1 D9:9"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| ingest, one session a call (") && stdout.contains("| recall, hybrid"),
        "{stdout}"
    );

    // A dataset with no question to score exits 1.
    let empty = dir.path().join("none.jsonl");
    std::fs::write(&empty, "\n").expect("write");
    let (code, stdout, _) = mosaic(&["eval", c, empty.to_str().expect("utf8"), "--json"]);
    assert_eq!(code, 1, "{stdout}");
    let only_adversarial = dir.path().join("adversarial.jsonl");
    write_lines(
        &only_adversarial,
        &[question("conv-a", "x", "cello?", 5, &["D1:4"])],
    );
    let (code, stdout, _) = mosaic(&["eval", c, only_adversarial.to_str().expect("utf8")]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("no question to score"), "{stdout}");
}

#[test]
fn eval_reports_malformed_input_with_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, q) = dataset(dir.path());
    let (c, q) = (c.to_str().expect("utf8"), q.to_str().expect("utf8"));
    let missing = dir.path().join("missing.jsonl");
    let missing = missing.to_str().expect("utf8");
    let (code, _, stderr) = mosaic(&["eval", missing, q]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("cannot read") && stderr.contains("missing.jsonl"),
        "{stderr}"
    );

    let bad = dir.path().join("bad.jsonl");
    let good_line = std::fs::read_to_string(q)
        .expect("read")
        .lines()
        .next()
        .expect("a line")
        .to_owned();
    std::fs::write(&bad, format!("{good_line}\n{{\"question_id\": \"x\"\n")).expect("write");
    let (code, _, stderr) = mosaic(&["eval", c, bad.to_str().expect("utf8")]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("bad.jsonl: line 2: not a question"),
        "{stderr}"
    );

    std::fs::write(&bad, "[1, 2]\n").expect("write");
    let (code, _, stderr) = mosaic(&["eval", bad.to_str().expect("utf8"), q]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("bad.jsonl: line 1: not a conversation"),
        "{stderr}"
    );

    write_lines(
        &bad,
        &[
            question("conv-a", "ok", "cello?", 4, &["D1:4"]),
            question("conv-z", "lost", "cello?", 4, &["D1:4"]),
        ],
    );
    let (code, _, stderr) = mosaic(&["eval", c, bad.to_str().expect("utf8")]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("line 2") && stderr.contains("conv-z"),
        "{stderr}"
    );

    // A category is a non-negative integer or a non-empty string
    // (checked while reading the file, before any service starts).
    for bad_category in [
        json!(1.5),
        json!(-2),
        json!(""),
        json!(null),
        json!({"a": 1}),
    ] {
        write_lines(
            &bad,
            &[
                question("conv-a", "ok", "cello?", 4, &["D1:4"]),
                question_in("conv-a", "odd", "cello?", bad_category.clone(), &["D1:4"]),
            ],
        );
        let (code, _, stderr) = mosaic(&["eval", c, bad.to_str().expect("utf8")]);
        assert_eq!(code, 2, "{bad_category}");
        assert!(
            stderr.contains("line 2") && stderr.contains("\"odd\"") && stderr.contains("category"),
            "{bad_category}: {stderr}"
        );
    }
    // --categories must name a category the file has.
    let (code, _, stderr) = mosaic(&["eval", c, q, "--categories", "2,preference"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("\"preference\""), "{stderr}");
    let (code, _, stderr) = mosaic(&["eval", c, q, "--categories", ","]);
    assert_eq!(code, 2);
    assert!(stderr.contains("names no category"), "{stderr}");

    let (code, _, stderr) = mosaic(&["eval", c, q, "--modes", "bm25"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("bm25"), "{stderr}");
}

#[test]
fn eval_takes_string_categories_and_a_category_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, _) = dataset(dir.path());
    let q = dir.path().join("named.jsonl");
    // The file that stopped at its first line with a number-only reader.
    write_lines(
        &q,
        &[
            question_in(
                "conv-a",
                "n1",
                "golden retriever puppy name?",
                json!("preference"),
                &["D1:1"],
            ),
            question_in("conv-a", "n2", "sister Lisbon?", json!("update"), &["D1:2"]),
            question_in(
                "conv-b",
                "n3",
                "violin recital cancelled?",
                json!("update"),
                &["D1:4"],
            ),
            question_in("conv-c", "n4", "aurora green bright?", json!(7), &["D2:1"]),
            question("conv-b", "n5", "pistachio gelato?", 5, &["D1:1"]),
        ],
    );
    let (c, q) = (c.to_str().expect("utf8"), q.to_str().expect("utf8"));
    let run = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            c,
            q,
            "--embedder",
            "hash",
            "--modes",
            "lexical",
            "--json",
        ];
        args.extend_from_slice(extra);
        let (code, stdout, stderr) = mosaic(&args);
        assert_eq!(code, 0, "{stdout}\n{stderr}");
        lines_of(&stdout)
    };
    let rows = |lines: &[Value]| -> Vec<(Value, u64)> {
        lines
            .iter()
            .filter(|l| l["type"] == "eval")
            .map(|l| {
                (
                    l["data"]["category"].clone(),
                    l["data"]["n"].as_u64().unwrap_or(0),
                )
            })
            .collect()
    };

    // Default: every category but the number 5; numbers first, then names,
    // then all (category 0).
    let lines = run(&[]);
    assert_eq!(lines[0]["data"]["questions_scored"], 4);
    assert_eq!(lines[0]["data"]["categories_skipped"], json!([5]));
    assert_eq!(
        rows(&lines),
        vec![
            (json!(7), 1),
            (json!("preference"), 1),
            (json!("update"), 2),
            (json!(0), 4)
        ]
    );
    let update = lines
        .iter()
        .find(|l| l["type"] == "eval" && l["data"]["category"] == "update")
        .map(|l| &l["data"])
        .expect("an update row");
    assert_eq!(update["category_name"], "update");
    assert!(close(&update["recall_at_10"], 1.0), "{update}");
    assert!(close(&update["any_hit_at_10"], 1.0), "{update}");

    // Only some categories; or skip none, so 5 is scored too.
    let lines = run(&["--categories", "update,5"]);
    assert_eq!(
        lines[0]["data"]["categories_scored"],
        json!(["update"]),
        "5 stays skipped"
    );
    assert_eq!(rows(&lines), vec![(json!("update"), 2), (json!(0), 2)]);
    let lines = run(&["--skip-categories", ""]);
    assert_eq!(lines[0]["data"]["questions_scored"], 5);
    assert_eq!(lines[0]["data"]["categories_skipped"], json!([]));
    let lines = run(&["--skip-categories", "preference,7"]);
    assert_eq!(
        rows(&lines),
        vec![(json!(5), 1), (json!("update"), 2), (json!(0), 3)]
    );

    // Everything filtered out: nothing to score, exit 1.
    let (code, stdout, _) = mosaic(&["eval", c, q, "--embedder", "hash", "--categories", "5"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("no question to score"), "{stdout}");
}

/// The `eval_dataset` line and the ingest latency row of a `--json` run.
fn dataset_and_ingest(stdout: &str) -> (Value, Value) {
    let lines = lines_of(stdout);
    let dataset = lines
        .iter()
        .find(|l| l["type"] == "eval_dataset")
        .map(|l| l["data"].clone())
        .unwrap_or_else(|| panic!("no dataset line: {stdout}"));
    let ingest = lines
        .iter()
        .find(|l| l["type"] == "eval_latency" && l["data"]["stage"] == "ingest")
        .map(|l| l["data"].clone())
        .unwrap_or_else(|| panic!("no ingest line: {stdout}"));
    (dataset, ingest)
}

#[test]
fn eval_measures_a_running_server_one_turn_a_call_on_a_split() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, q) = dataset(dir.path());
    let (c, q) = (c.to_str().expect("utf8"), q.to_str().expect("utf8"));
    let data = dir.path().join("served");
    let (_server, url) = crate::cli::start_server(&data);
    let admin = std::fs::read_to_string(data.join("admin.key")).expect("admin key");
    let run = || {
        mosaic(&[
            "eval",
            c,
            q,
            "--server",
            &url,
            "--admin-key",
            admin.trim(),
            "--ingest",
            "turns",
            "--conversations",
            "1-2",
            "--modes",
            "lexical",
            "--json",
        ])
    };
    let (code, stdout, stderr) = run();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let (d, ingest) = dataset_and_ingest(&stdout);
    // Conversations conv-b and conv-c only: 8 turns, one proposal each.
    assert_eq!(d["conversations"], 2, "{d}");
    assert_eq!(d["conversations_split"], json!([1, 2]));
    assert_eq!(d["ingest"], "turns");
    assert_eq!(d["turns"], 8);
    assert_eq!(ingest["n"], 8, "{ingest}");
    // b-q1 (category 1) and c-q1 (category 2) are scored; b-q2 is LoCoMo's
    // adversarial category; conv-a's questions are outside the split.
    assert_eq!(d["questions_scored"], 2, "{d}");
    assert_eq!(d["categories_scored"], json!([1, 2]));
    // A second run on the same server makes a tenant of its own.
    let (code, stdout, stderr) = run();
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert_eq!(dataset_and_ingest(&stdout).0["turns"], 8);
}

#[test]
fn eval_leaves_out_the_turns_a_question_is_made_of() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, _) = dataset(dir.path());
    let q = dir.path().join("asked.jsonl");
    let mut asked = question("conv-a", "a-q9", "cello?", 1, &["D1:4"]);
    asked["query_turn_id"] = json!("D1:3");
    asked["answer_turn_id"] = json!("D1:4");
    write_lines(&q, &[asked]);
    let (c, q) = (c.to_str().expect("utf8"), q.to_str().expect("utf8"));
    let args = [
        "eval",
        c,
        q,
        "--embedder",
        "hash",
        "--modes",
        "lexical",
        "--json",
    ];
    let (code, stdout, stderr) = mosaic(&args);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let (d, _) = dataset_and_ingest(&stdout);
    assert_eq!(d["turns"], 12);
    assert_eq!(d["question_turns_left_out"], 0);
    let (code, stdout, stderr) = mosaic(&[&args[..], &["--leave-out-question-turns"]].concat());
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let (d, _) = dataset_and_ingest(&stdout);
    assert_eq!(d["turns"], 10, "{d}");
    assert_eq!(d["question_turns_left_out"], 2);
    // The left-out reference reply was the evidence: a miss, and listed.
    assert_eq!(d["unknown_evidence_kept_as_misses"], json!(["a-q9 D1:4"]));

    // Hidden from the question's own ranking instead: every turn is kept,
    // and the reference reply (here the evidence) is never counted for it.
    let recall_at_10 = |stdout: &str| {
        lines_of(stdout)
            .iter()
            .find(|l| l["type"] == "eval" && l["data"]["category"] == 0)
            .map(|l| l["data"]["recall_at_10"].clone())
            .unwrap_or_else(|| panic!("no all row: {stdout}"))
    };
    assert!(close(&recall_at_10(&stdout), 0.0), "{stdout}");
    let (code, plain, stderr) = mosaic(&args);
    assert_eq!(code, 0, "{plain}\n{stderr}");
    assert!(close(&recall_at_10(&plain), 1.0), "{plain}");
    let (code, stdout, stderr) = mosaic(&[&args[..], &["--hide-own-turns"]].concat());
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let (d, _) = dataset_and_ingest(&stdout);
    assert_eq!(d["turns"], 12, "{d}");
    assert_eq!(d["own_turns_hidden"], true);
    assert_eq!(d["unknown_evidence_kept_as_misses"], json!([]));
    assert!(close(&recall_at_10(&stdout), 0.0), "{stdout}");
    // The two ways exclude each other.
    let (code, _, stderr) = mosaic(
        &[
            &args[..],
            &["--hide-own-turns", "--leave-out-question-turns"],
        ]
        .concat(),
    );
    assert_eq!(code, 2, "{stderr}");
}

#[test]
fn eval_refuses_a_bad_split_or_server_flags() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, q) = dataset(dir.path());
    let (c, q) = (c.to_str().expect("utf8"), q.to_str().expect("utf8"));
    for (extra, expected) in [
        (&["--conversations", "2-1"][..], "FIRST <= LAST"),
        (&["--conversations", "x"][..], "FIRST-LAST"),
        (&["--conversations", "0-3"][..], "holds 3 conversations"),
        (&["--ingest", "messages"][..], "not sessions or turns"),
        (
            &["--surfaces", "native,mem1"][..],
            "\"mem1\" is not one of native, mem0, mem0-platform",
        ),
        (&["--surfaces", " , "][..], "names no surface"),
        (&["--parallel", "0"][..], "at least 1"),
        (&["--batch", "0"][..], "1 to 1000"),
        (&["--batch", "1001"][..], "1 to 1000"),
        (&["--batch", "2", "--ingest", "turns"][..], "--ingest turns"),
        (&["--modes", "none"][..], "names no scored mode"),
        (
            &["--modes", "lexical,none", "--surfaces", "mem0"][..],
            "add native to --surfaces",
        ),
        (&["--write-guards", "[1]"][..], "a JSON object"),
        (&["--write-guards", "{"][..], "a JSON object"),
        (&["--server", "http://127.0.0.1:9"][..], "admin key"),
        (
            &[
                "--server",
                "http://127.0.0.1:9",
                "--admin-key",
                "k",
                "--embedder",
                "hash",
            ][..],
            "keeps its own",
        ),
    ] {
        let (code, stdout, stderr) = mosaic(&[&["eval", c, q][..], extra].concat());
        assert_eq!(code, 2, "{extra:?}: {stdout}\n{stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
    }
}

/// The `eval` rows of a `--json` run: (surface, mode, category) -> figures.
fn eval_rows(stdout: &str) -> Vec<Value> {
    lines_of(stdout)
        .into_iter()
        .filter(|l| l["type"] == "eval")
        .map(|l| l["data"].clone())
        .collect()
}

fn surface_lines(stdout: &str) -> Vec<Value> {
    lines_of(stdout)
        .into_iter()
        .filter(|l| l["type"] == "eval_surface")
        .map(|l| l["data"].clone())
        .collect()
}

#[test]
fn eval_scores_the_mem0_surfaces_through_their_own_routes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, q) = dataset(dir.path());
    let (c, q) = (c.to_str().expect("utf8"), q.to_str().expect("utf8"));
    let (code, stdout, stderr) = mosaic(&[
        "eval",
        c,
        q,
        "--embedder",
        "hash",
        "--modes",
        "lexical",
        "--surfaces",
        "mem0-platform,mem0,native",
        "--write-guards",
        r#"{"near_duplicate_cosine_permille": 1000}"#,
        "--json",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let d = &lines_of(&stdout)[0]["data"];
    assert_eq!(
        d["surfaces"],
        json!(["native", "mem0", "mem0-platform"]),
        "in their one order"
    );
    let rows = eval_rows(&stdout);
    // Every conversation holds 4 turns, so a surface that maps each answer
    // back to its turn finds every evidence turn that exists among 10: all
    // but c-q1's D9:9, which names no turn.
    for surface in ["native", "mem0", "mem0-platform"] {
        let all = rows
            .iter()
            .find(|r| r["surface"] == surface && r["category"] == 0)
            .unwrap_or_else(|| panic!("no {surface} row: {stdout}"));
        assert_eq!(all["n"], 4, "{all}");
        assert!(close(&all["recall_at_5"], 0.875), "{surface}: {all}");
        assert!(close(&all["recall_at_10"], 0.875), "{surface}: {all}");
        assert!(close(&all["any_hit_at_10"], 1.0), "{surface}: {all}");
        assert_eq!(
            all["mode"],
            if surface == "native" {
                json!("lexical")
            } else {
                Value::Null
            }
        );
        assert_eq!(
            rows.iter().filter(|r| r["surface"] == surface).count(),
            5,
            "categories 1-4 and all: {stdout}"
        );
    }
    let lines = surface_lines(&stdout);
    assert_eq!(lines.len(), 3, "{stdout}");
    for line in &lines {
        assert_eq!(line["turns"], 12, "{line}");
        assert_eq!(line["ingest_calls"], 4, "one call a session: {line}");
        assert_eq!(line["ingest_clients"], 1, "{line}");
        assert!(close(&line["recall_at_k"], 0.875), "{line}");
        assert!(close(&line["any_hit_at_k"], 1.0), "{line}");
        let (p50, p95) = (
            line["search_p50_ms"].as_f64().unwrap_or(-1.0),
            line["search_p95_ms"].as_f64().unwrap_or(-1.0),
        );
        assert!(0.0 < p50 && p50 <= p95, "{line}");
        // The server's own account, read from its /metrics.
        assert!(
            line["search_server_mean_ms"]
                .as_f64()
                .is_some_and(|m| m > 0.0),
            "{line}"
        );
        assert!(
            line["ingest_server_phase_mean_ms"]["commit"]
                .as_f64()
                .is_some_and(|m| m > 0.0),
            "{line}"
        );
    }
    // Neither memory ids nor memory content are printed.
    for needle in ["\"m-", " m-", "Biscuit", "pistachio"] {
        assert!(
            !stdout.contains(needle) && !stderr.contains(needle),
            "{needle} printed"
        );
    }

    // The human form: a row per surface in both tables.
    let (code, stdout, stderr) = mosaic(&[
        "eval",
        c,
        q,
        "--embedder",
        "hash",
        "--modes",
        "lexical",
        "--surfaces",
        "mem0",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("| mem0 | all | 4 |") && stdout.contains("| mem0 | 12 | 4 | 1 |"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("| lexical |"),
        "no native surface: {stdout}"
    );
}

#[test]
fn eval_with_parallel_clients_and_batches_scores_as_one_client() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, q) = dataset(dir.path());
    let (c, q) = (c.to_str().expect("utf8"), q.to_str().expect("utf8"));
    let run = |extra: &[&str]| {
        let (code, stdout, stderr) = mosaic(
            &[
                &[
                    "eval",
                    c,
                    q,
                    "--embedder",
                    "hash",
                    "--modes",
                    "lexical,hybrid",
                    "--surfaces",
                    "native,mem0",
                    "--json",
                ][..],
                extra,
            ]
            .concat(),
        );
        assert_eq!(code, 0, "{extra:?}: {stdout}\n{stderr}");
        stdout
    };
    let figures = |stdout: &str| -> Vec<Value> {
        eval_rows(stdout)
            .into_iter()
            .map(|mut r| {
                r.as_object_mut().map(|o| o.remove("ndcg_at_10"));
                r
            })
            .collect()
    };
    let one = run(&[]);
    let parallel = run(&["--parallel", "3"]);
    assert_eq!(figures(&one).len(), 15, "{one}");
    assert_eq!(figures(&one), figures(&parallel), "{one}\n{parallel}");
    for line in surface_lines(&parallel) {
        assert_eq!(line["ingest_clients"], 3, "{line}");
        assert_eq!(line["turns"], 12, "{line}");
        assert_eq!(line["ingest_calls"], 4, "{line}");
    }
    // More clients than conversations: one each.
    for line in surface_lines(&run(&["--parallel", "8"])) {
        assert_eq!(line["ingest_clients"], 3, "{line}");
    }
    // Calls of 3 consecutive turns of a conversation: 2 calls for each
    // 4-turn conversation on the native surface (conv-c's across its two
    // sessions), the same memories, the same figures.
    let batched = run(&["--batch", "3", "--parallel", "2"]);
    assert_eq!(figures(&one), figures(&batched), "{one}\n{batched}");
    let lines = surface_lines(&batched);
    assert_eq!(lines[0]["surface"], "native");
    assert_eq!(lines[0]["ingest_calls"], 6, "{batched}");
    assert_eq!(lines[1]["surface"], "mem0");
    assert_eq!(lines[1]["ingest_calls"], 4, "mem0 keeps one call a session");

    // `none` times a recall with no query per question beside the scored
    // modes, and scores nothing of its own.
    let (code, timed, stderr) = mosaic(&[
        "eval",
        c,
        q,
        "--embedder",
        "hash",
        "--modes",
        "lexical,hybrid,none",
        "--surfaces",
        "native,mem0",
        "--json",
    ]);
    assert_eq!(code, 0, "{timed}\n{stderr}");
    assert_eq!(figures(&one), figures(&timed), "{timed}");
    let none: Vec<Value> = lines_of(&timed)
        .into_iter()
        .filter(|l| l["type"] == "eval_latency" && l["data"]["mode"] == "none")
        .collect();
    assert_eq!(none.len(), 1, "{timed}");
    assert_eq!(none[0]["data"]["n"], 4, "one per scored question: {timed}");
}

/// A user's history with questions asked inside it (RealMem's form): one
/// conversation, two sessions, the questions' own turns and replies among
/// its turns.
fn asked_dataset(dir: &Path) -> (PathBuf, PathBuf) {
    let conversations = vec![conversation(
        "user-1",
        &[
            (
                "2025-01-05 (Sunday)",
                &[
                    ("D1:1", "user", "What should I feed a young dog?"),
                    (
                        "D1:2",
                        "assistant",
                        "Food made for young dogs, in small meals.",
                    ),
                    (
                        "D1:3",
                        "user",
                        "I adopted a golden retriever puppy named Biscuit.",
                    ),
                    ("D1:4", "user", "Remind me about my golden retriever puppy?"),
                    (
                        "D1:5",
                        "assistant",
                        "Your golden retriever puppy is Biscuit.",
                    ),
                ],
            ),
            (
                "2025-01-12 (Sunday)",
                &[
                    (
                        "D2:1",
                        "user",
                        "My golden retriever puppy learned to swim in the lake.",
                    ),
                    ("D2:2", "assistant", "Swimming is good exercise."),
                ],
            ),
        ],
    )];
    let placed = |id: &str, text: &str, category: &str, own: (&str, &str), evidence: &[&str]| {
        let mut q = question_in("user-1", id, text, json!(category), evidence);
        q["query_turn_id"] = json!(own.0);
        q["answer_turn_id"] = json!(own.1);
        q
    };
    let questions = vec![
        // Asked at the conversation's first turn: nothing is in memory yet.
        placed(
            "q-first",
            "golden retriever puppy?",
            "first",
            ("D1:1", "D1:2"),
            &["D1:3"],
        ),
        // Asked mid-session: the three turns before its own are in memory.
        placed(
            "q-before",
            "golden retriever puppy named?",
            "before",
            ("D1:4", "D1:5"),
            &["D1:3"],
        ),
        // Its evidence is its own reference reply and a later session's
        // turn: neither is in memory when it is asked.
        placed(
            "q-later",
            "golden retriever puppy swim lake?",
            "later",
            ("D1:4", "D1:5"),
            &["D1:5", "D2:1"],
        ),
        // No turn of its own (LoCoMo's form): asked after the history.
        question_in(
            "user-1",
            "q-after",
            "golden retriever puppy swim lake?",
            json!("after"),
            &["D2:1"],
        ),
    ];
    let c = dir.join("asked-conversations.jsonl");
    let q = dir.join("asked-questions.jsonl");
    write_lines(&c, &conversations);
    write_lines(&q, &questions);
    (c, q)
}

/// recall@10 of each category row of a surface (category name -> figure).
fn recall_by_category(stdout: &str, surface: &str) -> Vec<(String, f64)> {
    eval_rows(stdout)
        .iter()
        .filter(|r| r["surface"] == surface)
        .map(|r| {
            (
                r["category_name"].as_str().unwrap_or("").to_owned(),
                r["recall_at_10"].as_f64().unwrap_or(-1.0),
            )
        })
        .collect()
}

#[test]
fn eval_as_asked_recalls_only_the_history_before_each_question() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, q) = asked_dataset(dir.path());
    let (c, q) = (c.to_str().expect("utf8"), q.to_str().expect("utf8"));
    let base = [
        "eval",
        c,
        q,
        "--embedder",
        "hash",
        "--modes",
        "lexical",
        "--json",
    ];
    let run = |extra: &[&str]| {
        let (code, stdout, stderr) = mosaic(&[&base[..], extra].concat());
        assert_eq!(code, 0, "{extra:?}: {stdout}\n{stderr}");
        stdout
    };
    let expect = |stdout: &str, surface: &str, expected: &[(&str, f64)]| {
        let got = recall_by_category(stdout, surface);
        let want: Vec<(String, f64)> = expected
            .iter()
            .map(|(c, r)| ((*c).to_owned(), *r))
            .collect();
        assert_eq!(got.len(), want.len(), "{surface}: {stdout}");
        for ((name, got), (wanted_name, wanted)) in got.iter().zip(&want) {
            assert_eq!(name, wanted_name, "{surface}: {stdout}");
            assert!(
                (got - wanted).abs() < 1e-4,
                "{surface} {name}: {got} != {wanted}: {stdout}"
            );
        }
    };

    // The whole history first, then every question: each question's
    // evidence is in memory, its later turns and own reply included.
    let whole = run(&[]);
    expect(
        &whole,
        "native",
        &[
            ("after", 1.0),
            ("before", 1.0),
            ("first", 1.0),
            ("later", 1.0),
            ("all", 1.0),
        ],
    );

    // As asked: a question recalls a turn recorded before it, never its own
    // reply or a later turn, and before its conversation's first turn
    // nothing; a question with no turn of its own is asked after the
    // history, as before. The mem0 surface is asked at the same points.
    let asked = run(&["--as-asked", "--surfaces", "native,mem0"]);
    let as_asked = [
        ("after", 1.0),
        ("before", 1.0),
        ("first", 0.0),
        ("later", 0.0),
        ("all", 0.5),
    ];
    expect(&asked, "native", &as_asked);
    expect(&asked, "mem0", &as_asked);
    let (d, ingest) = dataset_and_ingest(&asked);
    assert_eq!(d["as_asked"], true, "{d}");
    assert_eq!(d["questions_asked_in_the_history"], 3, "{d}");
    assert_eq!(d["turns"], 7, "every turn is ingested: {d}");
    // The first session is cut before D1:4, where two questions are asked
    // (D1:1 is its first turn: no cut): three calls instead of two.
    assert_eq!(ingest["n"], 3, "{ingest}");
    let recalls: Vec<Value> = lines_of(&asked)
        .into_iter()
        .filter(|l| l["type"] == "eval_latency" && l["data"]["stage"] == "recall")
        .map(|l| l["data"].clone())
        .collect();
    assert_eq!(recalls.len(), 1, "{asked}");
    assert_eq!(recalls[0]["n"], 4, "one recall a question: {asked}");
    for line in surface_lines(&asked) {
        assert_eq!(line["turns"], 7, "{line}");
        assert!(
            line["search_server_mean_ms"]
                .as_f64()
                .is_some_and(|m| m > 0.0),
            "the searches during the ingest are in the server's account: {line}"
        );
    }

    // Calls of two consecutive turns: the one holding D1:3 and D1:4 is cut
    // between them, five calls instead of four, the same figures.
    let batched = run(&["--as-asked", "--batch", "2"]);
    expect(&batched, "native", &as_asked);
    assert_eq!(dataset_and_ingest(&batched).1["n"], 5, "{batched}");

    // A proposal a turn, against a running server: the same figures.
    let data = dir.path().join("served");
    let (_server, url) = crate::cli::start_server(&data);
    let admin = std::fs::read_to_string(data.join("admin.key")).expect("admin key");
    let (code, stdout, stderr) = mosaic(&[
        "eval",
        c,
        q,
        "--server",
        &url,
        "--admin-key",
        admin.trim(),
        "--ingest",
        "turns",
        "--modes",
        "lexical,hybrid",
        "--as-asked",
        "--json",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let rows = eval_rows(&stdout);
    for mode in ["lexical", "hybrid"] {
        let got: Vec<(String, f64)> = rows
            .iter()
            .filter(|r| r["mode"] == mode)
            .map(|r| {
                (
                    r["category_name"].as_str().unwrap_or("").to_owned(),
                    r["recall_at_10"].as_f64().unwrap_or(-1.0),
                )
            })
            .collect();
        let want: Vec<(String, f64)> = as_asked
            .iter()
            .map(|(c, r)| ((*c).to_owned(), *r))
            .collect();
        assert_eq!(got, want, "{mode}: {stdout}");
    }
    assert_eq!(dataset_and_ingest(&stdout).1["n"], 7, "a call a turn");

    // The human form says which protocol ran.
    let (code, stdout, stderr) = mosaic(&[
        "eval",
        c,
        q,
        "--embedder",
        "hash",
        "--modes",
        "lexical",
        "--as-asked",
    ]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("as asked: 3 questions asked at their place in the history"),
        "{stdout}"
    );
}

#[test]
fn eval_as_asked_refuses_what_it_cannot_place() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (c, q) = asked_dataset(dir.path());
    let (c, q) = (c.to_str().expect("utf8"), q.to_str().expect("utf8"));
    for (extra, expected) in [
        (&["--hide-own-turns"][..], "cannot be used with"),
        (&["--leave-out-question-turns"][..], "cannot be used with"),
        (&["--parallel", "2"][..], "leave --parallel at 1"),
    ] {
        let (code, stdout, stderr) = mosaic(
            &[
                &["eval", c, q, "--embedder", "hash", "--as-asked"][..],
                extra,
            ]
            .concat(),
        );
        assert_eq!(code, 2, "{extra:?}: {stdout}\n{stderr}");
        assert!(stderr.contains(expected), "{extra:?}: {stderr}");
    }
    // A question asked at a turn its conversation does not hold.
    let bad = dir.path().join("unplaced.jsonl");
    let mut lost = question_in("user-1", "q-lost", "puppy?", json!("lost"), &["D1:3"]);
    lost["query_turn_id"] = json!("D7:1");
    write_lines(&bad, &[lost]);
    let (code, stdout, stderr) = mosaic(&[
        "eval",
        c,
        bad.to_str().expect("utf8"),
        "--embedder",
        "hash",
        "--as-asked",
    ]);
    assert_eq!(code, 2, "{stdout}\n{stderr}");
    assert!(
        stderr.contains("\"q-lost\"") && stderr.contains("\"D7:1\"") && stderr.contains("user-1"),
        "{stderr}"
    );
}
