//! Read-your-writes through gRPC: a search or a bundle's retrieval asked
//! right after a write sees it (100 rounds each, no miss), a write's
//! response carries a consistency token, and a malformed token is
//! INVALID_ARGUMENT. Runs on PostgreSQL too (`MNEMO_TEST_STORE=postgres`);
//! the token across two daemons is tested in `postgres.rs`.

mod common;

use common::*;
use mnemo::pb;
use tonic::Code;

const ROUNDS: usize = 100;
const TOKEN: &str = "mnemo-consistency-token";

/// A word no other round's text holds (the index stems and lowercases).
fn word(kind: &str, i: usize) -> String {
    format!("{kind}{i:03}zq")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_right_after_an_append_finds_the_turn_every_time() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let mut misses = Vec::new();
    for i in 0..ROUNDS {
        let w = word("append", i);
        let r = c
            .append_turns(append_req(
                "ns",
                "s",
                vec![user_turn(&format!("the code is {w}"))],
            ))
            .await
            .expect("append");
        assert!(r.metadata().get(TOKEN).is_some(), "a write carries a token");
        let hits = c
            .search(search_request("ns", "", &w))
            .await
            .expect("search")
            .into_inner();
        let found = hits.hits.iter().filter(|h| h.snippet.contains(&w)).count();
        if found != 1 {
            misses.push((i, found));
        }
        assert_eq!(
            hits.index_lag, 0,
            "round {i}: nothing acknowledged is left to index"
        );
    }
    assert!(
        misses.is_empty(),
        "rounds whose turn was not found exactly once: {misses:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_right_after_put_fact_finds_the_fact_every_time() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let mut misses = Vec::new();
    for i in 0..ROUNDS {
        let w = word("fact", i);
        c.put_fact(pb::PutFactRequest {
            namespace: "ns".into(),
            subject_id: "customer:1".into(),
            key: format!("note_{i}"),
            text: format!("Prefers {w} for deliveries."),
            ..Default::default()
        })
        .await
        .expect("put fact");
        let hits = c
            .search(search_request("ns", "customer:1", &w))
            .await
            .expect("search")
            .into_inner()
            .hits;
        if !hits.iter().any(|h| h.kind() == pb::SearchKind::Fact) {
            misses.push(i);
        }
    }
    assert!(
        misses.is_empty(),
        "facts not found right after PutFact: {misses:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bundle_right_after_an_append_elsewhere_recalls_it_every_time() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    for id in ["earlier", "now"] {
        c.create_session(pb::CreateSessionRequest {
            namespace: "ns".into(),
            session_id: id.into(),
            subject_id: "customer:2".into(),
            ..Default::default()
        })
        .await
        .expect("create");
    }
    c.append_turns(append_req("ns", "now", vec![user_turn("Hello again.")]))
        .await
        .expect("append");
    let mut misses = Vec::new();
    for i in 0..ROUNDS {
        let w = word("locker", i);
        c.append_turns(append_req(
            "ns",
            "earlier",
            vec![user_turn(&format!("My locker number is {w}."))],
        ))
        .await
        .expect("append");
        let b = c
            .get_context_bundle(pb::GetContextBundleRequest {
                namespace: "ns".into(),
                session_id: "now".into(),
                budget_tokens: 2000,
                query: format!("what is my locker number {w}"),
                ..Default::default()
            })
            .await
            .expect("bundle")
            .into_inner()
            .bundle
            .expect("a bundle");
        if !b
            .rendered_text
            .contains(&format!("My locker number is {w}"))
        {
            misses.push(i);
        }
    }
    assert!(
        misses.is_empty(),
        "rounds whose bundle did not recall the turn: {misses:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_honoured_and_a_malformed_one_is_invalid_argument() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s").await;
    let r = c
        .append_turns(append_req("ns", "s", vec![user_turn("tokenized walrus")]))
        .await
        .expect("append");
    let token = r.metadata().get(TOKEN).expect("token").clone();
    let mut req = tonic::Request::new(search_request("ns", "", "walrus"));
    req.metadata_mut().insert(TOKEN, token);
    let hits = c.search(req).await.expect("search with token").into_inner();
    assert_eq!(hits.hits.len(), 1);
    // A token of another daemon (or of this one before a restart) is
    // honoured too: the answer waits for this daemon's next index pass.
    let mut req = tonic::Request::new(search_request("ns", "", "walrus"));
    req.metadata_mut()
        .insert(TOKEN, "c1.00000000000000ab.5".parse().unwrap());
    assert_eq!(
        c.search(req)
            .await
            .expect("foreign token")
            .into_inner()
            .hits
            .len(),
        1
    );
    for bad in ["c1.zz.1", "v9.1.1", "c1.1"] {
        let mut req = tonic::Request::new(search_request("ns", "", "walrus"));
        req.metadata_mut().insert(TOKEN, bad.parse().unwrap());
        let e = c.search(req).await.expect_err(bad);
        assert_eq!(e.code(), Code::InvalidArgument, "{bad}: {e}");
        assert!(e.message().contains("consistency token"), "{}", e.message());
        let mut req = tonic::Request::new(pb::GetContextBundleRequest {
            namespace: "ns".into(),
            session_id: "s".into(),
            budget_tokens: 1000,
            ..Default::default()
        });
        req.metadata_mut().insert(TOKEN, bad.parse().unwrap());
        let e = c.get_context_bundle(req).await.expect_err(bad);
        assert_eq!(e.code(), Code::InvalidArgument, "{bad}: {e}");
    }
    // Nothing was damaged by the refused reads.
    assert_eq!(all_turns(&mut c, "ns", "s").await.len(), 1);
    server.stop().await;
}
