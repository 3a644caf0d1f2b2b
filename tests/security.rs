//! Who may do what, through the real daemon: every MemoryService RPC
//! refuses a missing or unknown key (UNAUTHENTICATED) and a key used
//! outside its namespace or above its role (PERMISSION_DENIED); TLS and
//! mutual TLS with certificates made in the test.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{config_for, TestServer};
use mnemo::api::admit::Need;
use mnemo::client::{connect, ClientOptions, MemoryClient};
use mnemo::config::TlsConfig;
use mnemo::pb;
use mnemo::server::auth::{new_key, AuthConfig, KeyConfig, Permission, Role};
use prost::Message;
use tonic::{Code, Status};

/// Every RPC of MemoryService and the least role it needs. The test
/// below checks this list against the service descriptor, so an RPC added
/// later without an entry here fails it.
const RPCS: &[(&str, Need)] = &[
    ("CreateSession", Need::Role(Role::Write)),
    ("GetSession", Need::Role(Role::Read)),
    ("ListSessions", Need::Role(Role::Read)),
    ("CloseSession", Need::Role(Role::Write)),
    ("DeleteSession", Need::Role(Role::Admin)),
    ("AppendTurns", Need::Role(Role::Write)),
    ("RemoveLastTurn", Need::Role(Role::Write)),
    ("ListTurns", Need::Role(Role::Read)),
    ("Summarize", Need::Role(Role::Write)),
    ("GetSummary", Need::Role(Role::Read)),
    ("ListSummaries", Need::Role(Role::Read)),
    ("GetAuditLog", Need::Role(Role::Read)),
    ("ListReviewItems", Need::Role(Role::Read)),
    ("ResolveReviewItem", Need::Review),
    ("GetContextBundle", Need::Role(Role::Read)),
    ("Handoff", Need::Role(Role::Write)),
    ("WatchSession", Need::Role(Role::Read)),
    ("PutFact", Need::Role(Role::Write)),
    ("GetFact", Need::Role(Role::Read)),
    ("ListFacts", Need::Role(Role::Read)),
    ("DeleteFact", Need::Role(Role::Write)),
    ("ListEpisodes", Need::Role(Role::Read)),
    ("UpdatePendingAction", Need::Role(Role::Write)),
    ("Search", Need::Role(Role::Read)),
    ("EraseSubject", Need::Role(Role::Admin)),
    ("ExportSubject", Need::Role(Role::Admin)),
    ("ListErasures", Need::Role(Role::Admin)),
];

/// Calls `rpc` in namespace `ns` with an otherwise empty request. Only
/// the status code matters here: auth is checked before the request.
async fn call(c: &mut MemoryClient, rpc: &str, ns: &str) -> Result<(), Status> {
    let ns = ns.to_owned();
    macro_rules! send {
        ($method:ident, $req:ident) => {
            c.$method(pb::$req {
                namespace: ns,
                ..Default::default()
            })
            .await
            .map(|_| ())
        };
    }
    match rpc {
        "CreateSession" => send!(create_session, CreateSessionRequest),
        "GetSession" => send!(get_session, GetSessionRequest),
        "ListSessions" => send!(list_sessions, ListSessionsRequest),
        "CloseSession" => send!(close_session, CloseSessionRequest),
        "DeleteSession" => send!(delete_session, DeleteSessionRequest),
        "AppendTurns" => send!(append_turns, AppendTurnsRequest),
        "RemoveLastTurn" => send!(remove_last_turn, RemoveLastTurnRequest),
        "ListTurns" => send!(list_turns, ListTurnsRequest),
        "Summarize" => send!(summarize, SummarizeRequest),
        "GetSummary" => send!(get_summary, GetSummaryRequest),
        "ListSummaries" => send!(list_summaries, ListSummariesRequest),
        "GetAuditLog" => send!(get_audit_log, GetAuditLogRequest),
        "ListReviewItems" => send!(list_review_items, ListReviewItemsRequest),
        "ResolveReviewItem" => send!(resolve_review_item, ResolveReviewItemRequest),
        "GetContextBundle" => send!(get_context_bundle, GetContextBundleRequest),
        "Handoff" => send!(handoff, HandoffRequest),
        "WatchSession" => send!(watch_session, WatchSessionRequest),
        "PutFact" => send!(put_fact, PutFactRequest),
        "GetFact" => send!(get_fact, GetFactRequest),
        "ListFacts" => send!(list_facts, ListFactsRequest),
        "DeleteFact" => send!(delete_fact, DeleteFactRequest),
        "ListEpisodes" => send!(list_episodes, ListEpisodesRequest),
        "UpdatePendingAction" => send!(update_pending_action, UpdatePendingActionRequest),
        "Search" => send!(search, SearchRequest),
        "EraseSubject" => send!(erase_subject, EraseSubjectRequest),
        "ExportSubject" => send!(export_subject, ExportSubjectRequest),
        "ListErasures" => send!(list_erasures, ListErasuresRequest),
        other => panic!("no call for {other}"),
    }
}

struct Keys {
    read: String,
    write: String,
    admin: String,
    every_namespace: String,
    review: String,
}

fn auth_with_keys() -> (AuthConfig, Keys) {
    let mut config = AuthConfig::default();
    let mut make = |name: &str, namespace: &str, role: Role, permissions: Vec<Permission>| {
        let (key, sha256) = new_key().expect("key");
        config.keys.push(KeyConfig {
            name: name.into(),
            namespace: namespace.into(),
            role,
            permissions,
            sha256,
        });
        key
    };
    let keys = Keys {
        read: make("reader", "a", Role::Read, vec![]),
        write: make("writer", "a", Role::Write, vec![]),
        admin: make("admin", "a", Role::Admin, vec![]),
        every_namespace: make("operator", "*", Role::Admin, vec![]),
        review: make("reviewer", "a", Role::Read, vec![Permission::Review]),
    };
    (config, keys)
}

async fn client(server: &TestServer, api_key: Option<&str>) -> MemoryClient {
    connect(&ClientOptions {
        addr: server.url(),
        api_key: api_key.map(str::to_owned),
        ..ClientOptions::default()
    })
    .await
    .expect("connect")
}

fn is_auth_error(r: &Result<(), Status>) -> bool {
    matches!(r, Err(s) if matches!(s.code(), Code::Unauthenticated | Code::PermissionDenied))
}

#[tokio::test]
async fn the_rpc_table_names_every_rpc_of_the_service() {
    let set = prost_types::FileDescriptorSet::decode(pb::FILE_DESCRIPTOR_SET).expect("descriptors");
    let mut served: Vec<String> = set
        .file
        .iter()
        .flat_map(|f| &f.service)
        .filter(|s| s.name() == "MemoryService")
        .flat_map(|s| s.method.iter().map(|m| m.name().to_owned()))
        .collect();
    let mut listed: Vec<String> = RPCS.iter().map(|(n, _)| (*n).to_owned()).collect();
    served.sort();
    listed.sort();
    assert_eq!(served, listed);
}

#[tokio::test]
async fn every_rpc_checks_the_key_its_namespace_and_its_role() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    let (auth, keys) = auth_with_keys();
    config.auth = auth;
    let server = TestServer::start_with(config).await;

    let mut anonymous = client(&server, None).await;
    let mut unknown = client(&server, Some(&new_key().unwrap().0)).await;
    let mut malformed = client(&server, Some("not-a-key")).await;
    let mut reader = client(&server, Some(&keys.read)).await;
    let mut writer = client(&server, Some(&keys.write)).await;
    let mut admin = client(&server, Some(&keys.admin)).await;
    let mut operator = client(&server, Some(&keys.every_namespace)).await;
    let mut reviewer = client(&server, Some(&keys.review)).await;

    for &(rpc, needs) in RPCS {
        for (who, c) in [
            ("no key", &mut anonymous),
            ("unknown key", &mut unknown),
            ("malformed key", &mut malformed),
        ] {
            let e = call(c, rpc, "a").await.expect_err(rpc);
            assert_eq!(e.code(), Code::Unauthenticated, "{rpc} with {who}: {e:?}");
            assert!(!e.message().contains("mnemo_"), "a key leaked: {e:?}");
        }
        // Right role, wrong namespace.
        let e = call(&mut admin, rpc, "b").await.expect_err(rpc);
        assert_eq!(
            e.code(),
            Code::PermissionDenied,
            "{rpc} in another namespace"
        );
        assert!(e.message().contains("namespace"), "{}", e.message());
        // Each role in its own namespace, and a reader with the review
        // permission.
        for (role, permissions, c) in [
            (Role::Read, &[][..], &mut reader),
            (Role::Write, &[], &mut writer),
            (Role::Admin, &[], &mut admin),
            (Role::Read, &[Permission::Review], &mut reviewer),
        ] {
            let r = call(c, rpc, "a").await;
            if needs.met_by(role, permissions) {
                assert!(!is_auth_error(&r), "{rpc} with a {role:?} key: {r:?}");
            } else {
                let e = r.expect_err(rpc);
                assert_eq!(
                    e.code(),
                    Code::PermissionDenied,
                    "{rpc} with {role:?} {permissions:?}"
                );
            }
        }
        let r = call(&mut operator, rpc, "b").await;
        assert!(!is_auth_error(&r), "{rpc} with a '*' key: {r:?}");
    }

    // Health stays open: load balancers probe without a key.
    let mut health = tonic_health::pb::health_client::HealthClient::new(server.channel().await);
    health
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .expect("health without a key");
    server.stop().await;
}

#[tokio::test]
async fn a_write_through_a_refused_key_stores_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    let (auth, keys) = auth_with_keys();
    config.auth = auth;
    let server = TestServer::start_with(config).await;
    let mut reader = client(&server, Some(&keys.read)).await;
    let mut writer = client(&server, Some(&keys.write)).await;
    let create = pb::CreateSessionRequest {
        namespace: "a".into(),
        session_id: "s".into(),
        ..Default::default()
    };
    let e = reader.create_session(create.clone()).await.unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let listed = writer
        .list_sessions(pb::ListSessionsRequest {
            namespace: "a".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        listed.sessions.is_empty(),
        "the refused create left a session"
    );
    writer
        .create_session(create)
        .await
        .expect("a WRITE key creates");
    server.stop().await;
}

#[test]
fn a_non_loopback_daemon_without_keys_refuses_to_start() {
    let mut config = config_for(Path::new("/nonexistent"));
    config.listen = "0.0.0.0:50051".parse().unwrap();
    let e = config.validate().expect_err("auth required without keys");
    assert!(e.to_string().contains("mnemo key create"), "{e}");
    config.auth.required = Some(false);
    config.validate().expect("explicitly off is allowed");
}

#[test]
fn key_create_prints_a_key_once_and_a_config_line_the_daemon_accepts() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["key", "create", "--namespace", "support", "--role", "read"])
        .output()
        .expect("run mnemo key create");
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let key = text
        .split_whitespace()
        .find(|w| w.starts_with("mnemo_"))
        .expect("a key in the output");
    let toml_part = &text[text.find("[[auth.keys]]").expect("config lines")..];
    let config: mnemo::config::Config =
        toml::from_str(toml_part).expect("the printed lines are a valid config file");
    let auth = config.auth;
    let keys = mnemo::server::auth::Keys::new(&auth, true).expect("valid");
    let bearer = format!("Bearer {key}");
    match keys
        .caller(Some(bearer.as_bytes()))
        .expect("the printed key is accepted")
    {
        mnemo::server::auth::Caller::Key {
            namespace, role, ..
        } => {
            assert_eq!(namespace, "support");
            assert_eq!(role, Role::Read);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        !text[text.find("[[auth.keys]]").unwrap()..].contains(key),
        "the key is not in the config lines"
    );
}

struct Pki {
    ca_pem: String,
    server_cert: String,
    server_key: String,
    client_cert: String,
    client_key: String,
}

/// A CA, a server certificate for `localhost` and a client certificate,
/// all made here.
fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let client_key = KeyPair::generate().unwrap();
    let client = CertificateParams::new(vec!["agent-1".to_owned()])
        .unwrap()
        .signed_by(&client_key, &ca)
        .unwrap();
    Pki {
        ca_pem: ca.pem(),
        server_cert: server.pem(),
        server_key: server_key.serialize_pem(),
        client_cert: client.pem(),
        client_key: client_key.serialize_pem(),
    }
}

async fn tls_server(dir: &Path, pki: &Pki, mutual: bool) -> TestServer {
    let write = |name: &str, pem: &str| {
        let p = dir.join(name);
        std::fs::write(&p, pem).unwrap();
        p
    };
    let mut config = config_for(&dir.join("data"));
    config.tls = Some(TlsConfig {
        cert: write("server.pem", &pki.server_cert),
        key: write("server.key", &pki.server_key),
        client_ca: mutual.then(|| write("ca.pem", &pki.ca_pem)),
    });
    write("client.pem", &pki.client_cert);
    write("client.key", &pki.client_key);
    write("ca.pem", &pki.ca_pem);
    TestServer::start_with(config).await
}

fn tls_options(server: &TestServer, dir: &Path, identity: bool) -> ClientOptions {
    ClientOptions {
        addr: format!("https://localhost:{}", server.addr.port()),
        ca_cert: Some(dir.join("ca.pem")),
        client_identity: identity.then(|| (dir.join("client.pem"), dir.join("client.key"))),
        connect_timeout: Some(Duration::from_secs(5)),
        ..ClientOptions::default()
    }
}

async fn create(c: &mut MemoryClient, id: &str) -> Result<(), Status> {
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: id.into(),
        ..Default::default()
    })
    .await
    .map(|_| ())
}

#[tokio::test]
async fn tls_serves_a_client_that_trusts_the_ca_and_refuses_plaintext() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = pki();
    let server = tls_server(tmp.path(), &pki, false).await;

    let mut c = connect(&tls_options(&server, tmp.path(), false))
        .await
        .expect("TLS connect");
    create(&mut c, "over-tls").await.expect("a call over TLS");

    // A plaintext client fails cleanly (an error, within the deadline),
    // whether at connect or at its first call.
    let plain = tokio::time::timeout(Duration::from_secs(10), async {
        let mut c = connect(&ClientOptions {
            addr: server.url(),
            connect_timeout: Some(Duration::from_secs(5)),
            ..ClientOptions::default()
        })
        .await?;
        create(&mut c, "plain").await.map_err(|s| s.to_string())
    })
    .await
    .expect("a plaintext client does not hang");
    assert!(plain.is_err(), "plaintext accepted on a TLS port");

    // A client that does not trust the CA is refused at the handshake.
    let other = pki_ca_only();
    std::fs::write(tmp.path().join("other-ca.pem"), other).unwrap();
    let mut opts = tls_options(&server, tmp.path(), false);
    opts.ca_cert = Some(tmp.path().join("other-ca.pem"));
    let untrusted = match connect(&opts).await {
        Ok(mut c) => create(&mut c, "untrusted").await.map_err(|s| s.to_string()),
        Err(e) => Err(e),
    };
    assert!(
        untrusted.is_err(),
        "a certificate from an unknown CA was trusted"
    );
    server.stop().await;
}

fn pki_ca_only() -> String {
    pki().ca_pem
}

#[tokio::test]
async fn mutual_tls_needs_a_client_certificate_from_the_ca() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = pki();
    let server = tls_server(tmp.path(), &pki, true).await;

    let mut with_cert = connect(&tls_options(&server, tmp.path(), true))
        .await
        .expect("mTLS connect");
    create(&mut with_cert, "mtls")
        .await
        .expect("a call with a client certificate");

    let without = match connect(&tls_options(&server, tmp.path(), false)).await {
        Ok(mut c) => create(&mut c, "no-cert").await.map_err(|s| s.to_string()),
        Err(e) => Err(e),
    };
    assert!(
        without.is_err(),
        "a client without a certificate got through"
    );
    server.stop().await;
}

/// A config file with one WRITE key for namespace `ns`.
fn key_file(path: &Path, sha256: &str) {
    let text = format!(
        "[[auth.keys]]\nname = \"agent\"\nnamespace = \"ns\"\nrole = \"write\"\nsha256 = \"{sha256}\"\n"
    );
    std::fs::write(path, text).expect("write config");
}

async fn key_client(addr: &str, key: &str) -> MemoryClient {
    connect(&ClientOptions {
        addr: addr.into(),
        api_key: Some(key.into()),
        ..ClientOptions::default()
    })
    .await
    .expect("connect")
}

/// Keys rotate without a restart: on SIGHUP the daemon reads its config
/// again, the new key works and the old one is refused; a config that does
/// not validate is logged and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_keys_and_a_bad_config_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mnemo.toml");
    let (old, old_sha) = new_key().unwrap();
    let (new, new_sha) = new_key().unwrap();
    key_file(&config, &old_sha);
    let daemon = common::Binary::start_with(
        &dir.path().join("data"),
        &[],
        &["--config", config.to_str().unwrap()],
    );
    let url = daemon.url();
    let (mut with_old, mut with_new) = (key_client(&url, &old).await, key_client(&url, &new).await);
    create(&mut with_old, "before")
        .await
        .expect("the first key works");
    let refused = create(&mut with_new, "early")
        .await
        .expect_err("not yet a key");
    assert_eq!(refused.code(), Code::Unauthenticated);

    key_file(&config, &new_sha);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("[summaries]\nqueue = 7\n");
    std::fs::write(&config, text).unwrap();
    daemon.signal("HUP");
    daemon.wait_for_log("API keys reloaded", 1);
    daemon.wait_for_log("take effect at the next restart", 1);
    create(&mut with_new, "after")
        .await
        .expect("the new key works");
    let revoked = create(&mut with_old, "late").await.expect_err("revoked");
    assert_eq!(revoked.code(), Code::Unauthenticated, "{revoked:?}");

    // Refused, and the new key stays: auth required with no key at all,
    // then a file that does not parse.
    let bad = ["[auth]\nrequired = true\n", "[[auth.keys]\n"];
    for (n, text) in bad.into_iter().enumerate() {
        std::fs::write(&config, text).unwrap();
        daemon.signal("HUP");
        daemon.wait_for_log("configuration not reloaded", n + 1);
        create(&mut with_new, &format!("still-{n}"))
            .await
            .expect("a bad reload keeps the keys");
    }
    drop((with_old, with_new));
    let status = daemon.terminate();
    assert!(status.success(), "{status:?}");
}

/// TLS, mutual TLS and API keys set by flags alone (no config file), as
/// containers and process managers set them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_keys_by_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = pki();
    let write = |name: &str, pem: &str| {
        let p = tmp.path().join(name);
        std::fs::write(&p, pem).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let (cert, key, ca) = (
        write("server.pem", &pki.server_cert),
        write("server.key", &pki.server_key),
        write("ca.pem", &pki.ca_pem),
    );
    write("client.pem", &pki.client_cert);
    write("client.key", &pki.client_key);
    let (api_key, sha256) = new_key().unwrap();
    let key_flag = format!("agent:ns:write:{sha256}");
    let daemon = common::Binary::start_with(
        &tmp.path().join("data"),
        &[],
        &[
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-client-ca",
            &ca,
            "--auth-key",
            &key_flag,
        ],
    );
    let options = ClientOptions {
        addr: format!("https://localhost:{}", daemon.addr.port()),
        ca_cert: Some(tmp.path().join("ca.pem")),
        client_identity: Some((tmp.path().join("client.pem"), tmp.path().join("client.key"))),
        connect_timeout: Some(Duration::from_secs(5)),
        ..ClientOptions::default()
    };
    let mut with_key = connect(&ClientOptions {
        api_key: Some(api_key),
        ..options.clone()
    })
    .await
    .expect("mTLS connect");
    create(&mut with_key, "by-flags")
        .await
        .expect("a call with the key over mutual TLS");
    let mut without_key = connect(&options).await.expect("mTLS connect");
    let refused = create(&mut without_key, "no-key").await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    // No client certificate: the handshake or the first call fails.
    let no_cert = ClientOptions {
        client_identity: None,
        ..options
    };
    if let Ok(mut c) = connect(&no_cert).await {
        assert!(create(&mut c, "no-cert").await.is_err());
    }
}

#[test]
fn tls_flags_are_checked() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["serve", "--tls-client-ca", "/nonexistent/ca.pem"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tls-client-ca needs TLS"), "{err}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args(["serve", "--auth-key", "agent:ns:owner:ab"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("read, write or admin"), "{err}");
}

/// gRPC reflection answers in both versions (v1alpha is all that older
/// grpcurl, Postman and Python's reflection client speak).
#[tokio::test]
async fn reflection_answers_v1_and_v1alpha() {
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1alpha::ServerReflectionRequest;
    let server = TestServer::start().await;
    let mut c = ServerReflectionClient::new(server.channel().await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut stream = c
        .server_reflection_info(tokio_stream::iter(vec![request]))
        .await
        .expect("v1alpha reflection")
        .into_inner();
    let answer = stream.message().await.unwrap().expect("an answer");
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("not a service list: {answer:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.iter().any(|n| n == "mnemo.v1.MemoryService"),
        "{names:?}"
    );
    server.stop().await;
}
