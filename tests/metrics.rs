//! The Prometheus endpoint end to end: a daemon with `metrics_listen`
//! serves `GET /metrics`; after real gRPC traffic the exposition parses and
//! holds the request counters (by RPC and code), latency histograms, and
//! the domain's figures (turns, summaries, search index lag, disk size).

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::time::{Duration, Instant};

use common::*;
use mnemo::pb;

/// One sample: metric name with its labels, and its value.
fn parse(text: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("sample line: series value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("bad value in {line:?}"));
        assert!(
            series.starts_with("mnemo_"),
            "every series is mnemo's: {line:?}"
        );
        if let Some((_, labels)) = series.split_once('{') {
            assert!(labels.ends_with('}'), "labels close: {line:?}");
        }
        out.insert(series.to_owned(), value);
    }
    out
}

fn scrape(addr: std::net::SocketAddr) -> (String, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to metrics");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("http response");
    (head.to_owned(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_endpoint_counts_requests_and_reports_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    config.metrics_listen = Some(port);
    let server = TestServer::start_with(config).await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let turns = (0..12)
        .map(|i| user_turn(&format!("turn {i} about invoices")))
        .collect();
    c.append_turns(append_req("ns", "s", turns)).await.unwrap();
    let err = c
        .get_session(pb::GetSessionRequest {
            namespace: "ns".into(),
            session_id: "nope".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    c.summarize(pb::SummarizeRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
        wait: true,
    })
    .await
    .unwrap();

    // An erase of a subject with one session of two turns.
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: "gone".into(),
        subject_id: "cust-9".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.append_turns(append_req(
        "ns",
        "gone",
        vec![user_turn("a"), user_turn("b")],
    ))
    .await
    .unwrap();
    c.erase_subject(pb::EraseSubjectRequest {
        namespace: "ns".into(),
        subject_id: "cust-9".into(),
    })
    .await
    .unwrap();

    // The indexer catches up shortly; the exposition says so.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (head, m) = loop {
        let (head, body) = scrape(port);
        let m = parse(&body);
        if m.get("mnemo_search_index_lag") == Some(&0.0) || Instant::now() > deadline {
            break (head, m);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head
        .to_lowercase()
        .contains("content-type: application/openmetrics-text"));
    let get = |k: &str| *m.get(k).unwrap_or_else(|| panic!("{k} missing from {m:?}"));
    assert_eq!(
        get(r#"mnemo_requests_total{rpc="AppendTurns",code="OK"}"#),
        2.0
    );
    assert_eq!(
        get(r#"mnemo_requests_total{rpc="GetSession",code="NOT_FOUND"}"#),
        1.0
    );
    assert_eq!(
        get(r#"mnemo_request_duration_seconds_count{rpc="AppendTurns"}"#),
        2.0
    );
    assert!(get(r#"mnemo_request_duration_seconds_sum{rpc="Summarize"}"#) > 0.0);
    assert_eq!(get("mnemo_turns_appended_total"), 14.0);
    assert_eq!(get("mnemo_subject_erases_total"), 1.0);
    // At least the session and its two turns.
    assert!(get("mnemo_subject_erased_records_total") >= 3.0);
    assert_eq!(get("mnemo_subject_erases_running"), 0.0);
    // No retention table: a series per kind, nothing removed.
    for kind in ["turns", "summaries", "episodes", "audit_records", "facts"] {
        assert_eq!(
            get(&format!("mnemo_retention_deleted_total{{kind=\"{kind}\"}}")),
            0.0
        );
    }
    assert!(get("mnemo_tokens_appended_total") >= 12.0);
    assert!(get("mnemo_summaries_written_total") >= 1.0);
    assert_eq!(get("mnemo_search_index_lag"), 0.0);
    assert!(get("mnemo_search_index_applied_total") >= 1.0);
    assert_eq!(get("mnemo_watch_streams_open"), 0.0);
    assert!(get("mnemo_store_syncs_total") >= 2.0);
    assert!(get("mnemo_store_sync_wait_microseconds_total") > 0.0);
    // Where appends spent their time: the store's call holds its plan.
    assert!(get("mnemo_append_calls_total") >= 1.0);
    assert!(get("mnemo_append_store_microseconds_total") > 0.0);
    assert!(
        get("mnemo_append_store_microseconds_total") >= get("mnemo_append_plan_microseconds_total")
    );
    assert!(get("mnemo_data_dir_bytes") > 0.0);
    if on_postgres() {
        assert!(get("mnemo_postgres_connections") >= 1.0);
        assert!(get("mnemo_postgres_connections_idle") <= get("mnemo_postgres_connections"));
    } else {
        assert!(!m.contains_key("mnemo_postgres_connections"));
    }
    drop(c);
    server.stop().await;
}
