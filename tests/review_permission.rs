//! Who may close the review queue (issue 44, finding 1): resolving a
//! review item needs an ADMIN key or the `review` permission, which an
//! agent's write key does not have; the audit log and the item keep the
//! name of the key that acted beside the reviewer's free text.

mod common;

use common::{config_for, TestServer};
use mnemo::client::{connect, ClientOptions, MemoryClient};
use mnemo::pb;
use mnemo::server::auth::{new_key, AuthConfig, KeyConfig, Permission, Role};
use tonic::Code;

const NS: &str = "ns";

struct Keys {
    agent: String,
    reviewer: String,
    reviewing_writer: String,
    admin: String,
}

async fn daemon() -> (TestServer, Keys, tempfile::TempDir) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut config = config_for(&tmp.path().join("data"));
    let mut auth = AuthConfig::default();
    let mut make = |name: &str, role: Role, permissions: Vec<Permission>| {
        let (key, sha256) = new_key().expect("key");
        auth.keys.push(KeyConfig {
            name: name.into(),
            namespace: NS.into(),
            role,
            permissions,
            sha256,
        });
        key
    };
    let keys = Keys {
        agent: make("agent-billing", Role::Write, vec![]),
        reviewer: make("reviewer-lea", Role::Read, vec![Permission::Review]),
        reviewing_writer: make("lead-sam", Role::Write, vec![Permission::Review]),
        admin: make("ops", Role::Admin, vec![]),
    };
    config.auth = auth;
    (TestServer::start_with(config).await, keys, tmp)
}

async fn client(server: &TestServer, key: &str) -> MemoryClient {
    connect(&ClientOptions {
        addr: server.url(),
        api_key: Some(key.to_owned()),
        ..ClientOptions::default()
    })
    .await
    .expect("connect")
}

/// A high-risk session whose summary promises a refund: one pending
/// review item.
async fn pending_item(c: &mut MemoryClient, id: &str) -> pb::ReviewItem {
    common::risky_session(c, NS, id, "the duplicate charge").await;
    let items = c
        .list_review_items(pb::ListReviewItemsRequest {
            namespace: NS.into(),
            ..Default::default()
        })
        .await
        .expect("list review items")
        .into_inner()
        .items;
    items
        .into_iter()
        .find(|i| i.session_id == id)
        .expect("the session's summary entered the review queue")
}

fn approve(item: &pb::ReviewItem, reviewer: &str) -> pb::ResolveReviewItemRequest {
    pb::ResolveReviewItemRequest {
        namespace: NS.into(),
        review_id: item.review_id.clone(),
        status: pb::ReviewStatus::Approved as i32,
        reviewer: reviewer.into(),
        comment: "looks fine".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_write_key_cannot_approve_its_own_review_item() {
    let (server, keys, _tmp) = daemon().await;
    let mut agent = client(&server, &keys.agent).await;
    let item = pending_item(&mut agent, "s1").await;

    let e = agent
        .resolve_review_item(approve(&item, "human-supervisor"))
        .await
        .expect_err("a write key must not close the review queue");
    assert_eq!(e.code(), Code::PermissionDenied, "{e:?}");
    assert!(
        e.message().contains("review permission") && e.message().contains("ADMIN"),
        "the message says what is needed: {}",
        e.message()
    );
    let still = pending_item_again(&mut agent, &item).await;
    assert_eq!(still.status, pb::ReviewStatus::Pending as i32, "unchanged");
    assert!(
        audit_log(&mut agent, "s1")
            .await
            .iter()
            .all(|r| r.kind != pb::AuditKind::ReviewResolved as i32),
        "a refused decision leaves no audit record"
    );

    // A person's key with the review permission may, and the record names
    // the key beside what the person typed.
    let mut reviewer = client(&server, &keys.reviewer).await;
    let done = reviewer
        .resolve_review_item(approve(&item, "Lea (billing lead)"))
        .await
        .expect("a READ key with the review permission resolves")
        .into_inner()
        .item
        .expect("item");
    assert_eq!(done.status, pb::ReviewStatus::Approved as i32);
    assert_eq!(done.reviewer, "Lea (billing lead)");
    assert_eq!(done.reviewer_key, "reviewer-lea");
    let log = audit_log(&mut reviewer, "s1").await;
    let record = log
        .iter()
        .find(|r| r.kind == pb::AuditKind::ReviewResolved as i32)
        .expect("the decision is audited");
    assert_eq!(record.reviewer, "Lea (billing lead)");
    assert_eq!(record.reviewer_key, "reviewer-lea");
    // The permission adds no write right: a reviewer's READ key stays a
    // reader.
    let e = reviewer
        .create_session(pb::CreateSessionRequest {
            namespace: NS.into(),
            ..Default::default()
        })
        .await
        .expect_err("review is beside the roles, not above write");
    assert_eq!(e.code(), Code::PermissionDenied);
    server.stop().await;
}

async fn audit_log(c: &mut MemoryClient, id: &str) -> Vec<pb::AuditRecord> {
    c.get_audit_log(pb::GetAuditLogRequest {
        namespace: NS.into(),
        session_id: id.into(),
        ..Default::default()
    })
    .await
    .expect("audit log")
    .into_inner()
    .records
}

async fn pending_item_again(c: &mut MemoryClient, item: &pb::ReviewItem) -> pb::ReviewItem {
    c.list_review_items(pb::ListReviewItemsRequest {
        namespace: NS.into(),
        include_resolved: true,
        ..Default::default()
    })
    .await
    .expect("list")
    .into_inner()
    .items
    .into_iter()
    .find(|i| i.review_id == item.review_id)
    .expect("the item is still there")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_and_a_write_key_with_the_review_permission_may_resolve() {
    let (server, keys, _tmp) = daemon().await;
    let mut agent = client(&server, &keys.agent).await;
    let first = pending_item(&mut agent, "s1").await;
    let second = pending_item(&mut agent, "s2").await;
    let mut admin = client(&server, &keys.admin).await;
    let done = admin
        .resolve_review_item(approve(&first, "on-call"))
        .await
        .expect("ADMIN resolves")
        .into_inner()
        .item
        .unwrap();
    assert_eq!(done.reviewer_key, "ops");
    let mut lead = client(&server, &keys.reviewing_writer).await;
    let done = lead
        .resolve_review_item(approve(&second, "Sam"))
        .await
        .expect("WRITE + review resolves")
        .into_inner()
        .item
        .unwrap();
    assert_eq!(done.reviewer_key, "lead-sam");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_auth_off_the_record_says_anyone() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let server = TestServer::start_with(config_for(&tmp.path().join("data"))).await;
    let mut c = connect(&ClientOptions {
        addr: server.url(),
        ..ClientOptions::default()
    })
    .await
    .expect("connect");
    let item = pending_item(&mut c, "s1").await;
    let done = c
        .resolve_review_item(approve(&item, "kim"))
        .await
        .expect("auth off: anyone local may resolve")
        .into_inner()
        .item
        .unwrap();
    assert_eq!(done.reviewer_key, "anyone");
    server.stop().await;
}

#[test]
fn key_create_with_the_review_permission_prints_a_config_the_daemon_accepts() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args([
            "key",
            "create",
            "--namespace",
            NS,
            "--role",
            "read",
            "--permission",
            "review",
            "--name",
            "reviewer-lea",
        ])
        .output()
        .expect("run mnemo key create");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let toml_part = &text[text.find("[[auth.keys]]").expect("config lines")..];
    assert!(
        toml_part.contains(r#"permissions = ["review"]"#),
        "{toml_part}"
    );
    let config: mnemo::config::Config = toml::from_str(toml_part).expect("a valid config");
    assert_eq!(config.auth.keys[0].permissions, vec![Permission::Review]);
    assert_eq!(config.auth.keys[0].role, Role::Read);
}
