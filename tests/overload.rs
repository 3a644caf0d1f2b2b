//! Bounded under load, through the real daemon: requests past the global
//! concurrency limit are shed at once with RESOURCE_EXHAUSTED and lose
//! nothing that was acknowledged; health turns NOT_SERVING at shutdown.

mod common;

use common::{append_req, config_for, create_session, user_turn, TestServer};
use tonic::Code;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn requests_past_the_limit_are_shed_and_acknowledged_ones_are_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    config.limits.max_concurrent_requests = 2;
    let server = TestServer::start_with(config).await;
    let mut setup = server.client().await;
    const SESSIONS: usize = 8;
    for i in 0..SESSIONS {
        create_session(&mut setup, "ns", &format!("s{i}")).await;
    }
    let mut tasks = Vec::new();
    for i in 0..SESSIONS {
        // One connection per session, so the per-connection limit is not
        // what refuses them.
        let mut c = server.client().await;
        tasks.push(tokio::spawn(async move {
            let (mut acked, mut shed) = (0u64, 0u64);
            for n in 0..40 {
                let text = format!("turn {n} of s{i}");
                match c
                    .append_turns(append_req("ns", &format!("s{i}"), vec![user_turn(&text)]))
                    .await
                {
                    Ok(_) => acked += 1,
                    Err(e) if e.code() == Code::ResourceExhausted => {
                        assert!(e.message().contains("retry"), "{}", e.message());
                        shed += 1;
                    }
                    Err(e) => panic!("unexpected error under load: {e:?}"),
                }
            }
            (i, acked, shed)
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    // Checked once every appender is done, so the reads are not shed.
    let mut total_shed = 0;
    for (i, acked, shed) in results {
        total_shed += shed;
        let turns = common::all_turns(&mut setup, "ns", &format!("s{i}")).await;
        assert_eq!(
            turns.len() as u64,
            acked,
            "s{i}: every acknowledged turn, and only those"
        );
        let seqs: Vec<u64> = turns.iter().map(|t| t.seq).collect();
        assert_eq!(seqs, (1..=acked).collect::<Vec<_>>(), "gap-free");
    }
    assert!(
        total_shed > 0,
        "8 connections against a limit of 2 never shed"
    );
    server.stop().await;
}

#[tokio::test]
async fn health_turns_not_serving_when_shutdown_begins() {
    let server = TestServer::start().await;
    let mut health = HealthClient::new(server.channel().await);
    let mut watch = health
        .watch(HealthCheckRequest {
            service: "mnemo.v1.MemoryService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let first = watch.message().await.unwrap().unwrap();
    assert_eq!(first.status(), ServingStatus::Serving);
    let stopping = tokio::spawn(server.stop());
    let next = watch.message().await.unwrap().expect("a status change");
    assert_eq!(next.status(), ServingStatus::NotServing);
    stopping.await.unwrap();
}
