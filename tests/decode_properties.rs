//! Property tests (proptest, stable toolchain) over the daemon's request
//! decode path (issue 44): arbitrary bytes, and well-formed requests cut
//! short or with a byte changed, sent as the request message of several
//! RPCs (unary and streaming) through a real gRPC connection. No call may
//! answer INTERNAL, UNKNOWN or DATA_LOSS (a handler panic answers
//! INTERNAL, so none panicked either), and the daemon still serves after.
//! Arbitrary well-formed requests of every type are in `properties.rs`.

mod common;

use common::{raw, TestServer};
use mnemo::pb;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use prost::Message;
use tonic::Code;

/// The RPCs tried, and whether each streams its answer.
const RPCS: [(&str, bool); 8] = [
    ("CreateSession", false),
    ("AppendTurns", false),
    ("GetContextBundle", false),
    ("Search", false),
    ("PutFact", false),
    ("ResolveReviewItem", false),
    ("ListTurns", false),
    ("WatchSession", true),
];

/// Well-formed encodings of requests of the RPCs above, for the
/// strategies to cut and corrupt.
fn samples() -> Vec<Vec<u8>> {
    vec![
        pb::CreateSessionRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            title: "Refund ✓".into(),
            ..Default::default()
        }
        .encode_to_vec(),
        common::append_req(
            "ns",
            "s",
            vec![common::user_turn("Please refund order 1001 €40.")],
        )
        .encode_to_vec(),
        pb::GetContextBundleRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            budget_tokens: 2000,
            query: "refund".into(),
            ..Default::default()
        }
        .encode_to_vec(),
        common::search_request("ns", "u", "refund").encode_to_vec(),
    ]
}

/// Arbitrary bytes, and the samples cut short or with one byte changed.
fn bodies() -> BoxedStrategy<Vec<u8>> {
    let samples = samples();
    let cut = {
        let s = samples.clone();
        (0..s.len(), any::<prop::sample::Index>()).prop_map(move |(i, at)| {
            let body = &s[i];
            body[..at.index(body.len().max(1)).min(body.len())].to_vec()
        })
    };
    let flipped = (0..samples.len(), any::<prop::sample::Index>(), any::<u8>()).prop_map(
        move |(i, at, b)| {
            let mut body = samples[i].clone();
            let n = body.len();
            body[at.index(n)] = b;
            body
        },
    );
    prop_oneof![
        3 => prop::collection::vec(any::<u8>(), 0..256),
        2 => cut,
        2 => flipped,
    ]
    .boxed()
}

#[test]
fn arbitrary_request_bytes_never_answer_internal() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tmp = tempfile::tempdir().unwrap();
    let server = rt.block_on(TestServer::start_with(common::config_for(
        &tmp.path().join("data"),
    )));
    let channel = rt.block_on(server.channel());
    let mut runner = TestRunner::new(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (0..RPCS.len(), bodies());
    runner
        .run(&strategy, |(which, body)| {
            let (rpc, streaming) = RPCS[which];
            let s = rt.block_on(raw::call(&channel, rpc, body.clone(), streaming));
            let bad = matches!(s.code(), Code::Internal | Code::Unknown | Code::DataLoss);
            prop_assert!(
                !bad,
                "{rpc} with {} bytes {:02x?}: {:?} {}",
                body.len(),
                &body[..body.len().min(64)],
                s.code(),
                s.message()
            );
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    // Still serving.
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    rt.block_on(health.check(tonic_health::pb::HealthCheckRequest::default()))
        .expect("the daemon still answers");
    rt.block_on(server.stop());
}
