//! The docs' access table (docs/operations.md, "Who may call what") is
//! checked against what the code enforces, never against a copy of the
//! table: every method of the compiled MemoryService descriptor is called
//! with keys of each role (and the review permission) and the right it
//! needs is read off which keys are refused; every route of the
//! inspector's router is requested through inspectors holding such keys.
//! The test then requires the docs' table to say exactly that.

mod common;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use common::{config_for, raw, TestServer};
use mnemo::client::{connect, ClientOptions};
use mnemo::inspect::{Inspector, Settings};
use mnemo::pb;
use mnemo::server::auth::{new_key, AuthConfig, KeyConfig, Permission, Role};
use prost::Message;
use tonic::Code;

/// The keys the probes use: one per role in every namespace, a reader
/// with the review permission, and a reader of another namespace.
struct Keys {
    read: String,
    write: String,
    admin: String,
    review: String,
    elsewhere: String,
}

fn auth() -> (AuthConfig, Keys) {
    let mut config = AuthConfig::default();
    let mut make = |ns: &str, role: Role, permissions: Vec<Permission>| {
        let (key, sha256) = new_key().expect("key");
        config.keys.push(KeyConfig {
            name: format!("{role:?}-{ns}-{}", permissions.len()),
            namespace: ns.into(),
            role,
            permissions,
            sha256,
        });
        key
    };
    let keys = Keys {
        read: make("*", Role::Read, vec![]),
        write: make("*", Role::Write, vec![]),
        admin: make("*", Role::Admin, vec![]),
        review: make("*", Role::Read, vec![Permission::Review]),
        elsewhere: make("other", Role::Read, vec![]),
    };
    (config, keys)
}

/// The right named by which keys were let through.
fn need(read: bool, write: bool, review: bool, admin: bool, none: bool) -> &'static str {
    match (none, read, write, review, admin) {
        (true, ..) => "none",
        (_, true, ..) => "read",
        (_, _, true, ..) => "write",
        (_, _, _, true, _) => "admin or review",
        (_, _, _, _, true) => "admin",
        _ => "nobody",
    }
}

/// The docs' table: first cell (in backticks) -> second cell.
fn docs_table() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .expect("docs/operations.md");
    let section = text
        .split("### Who may call what")
        .nth(1)
        .expect("the section")
        .split("\n## ")
        .next()
        .unwrap_or_default();
    section
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let call = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((call.to_owned(), cells.get(2)?.to_string()))
        })
        .collect()
}

fn bearer(key: &str) -> tonic::Request<Vec<u8>> {
    let mut r = tonic::Request::new(Vec::new());
    r.metadata_mut()
        .insert("authorization", format!("Bearer {key}").parse().unwrap());
    r
}

/// What the daemon enforces for every method of the compiled descriptor.
async fn rpc_needs(server: &TestServer, keys: &Keys) -> BTreeMap<String, String> {
    let ch = server.channel().await;
    let set = prost_types::FileDescriptorSet::decode(pb::FILE_DESCRIPTOR_SET).expect("descriptors");
    let methods: Vec<(String, bool)> = set
        .file
        .iter()
        .flat_map(|f| &f.service)
        .filter(|s| s.name() == "MemoryService")
        .flat_map(|s| s.method.iter())
        .map(|m| (m.name().to_owned(), m.server_streaming()))
        .collect();
    assert!(methods.len() > 20, "{methods:?}");
    let mut out = BTreeMap::new();
    for (name, streaming) in methods {
        let path = format!("/mnemo.v1.MemoryService/{name}");
        let allowed = |key: Option<&str>| {
            let (ch, path) = (ch.clone(), path.clone());
            let request = key.map_or_else(|| tonic::Request::new(Vec::new()), bearer);
            async move {
                let s = raw::call_path(&ch, &path, request, streaming).await;
                assert_ne!(s.code(), Code::Internal, "{path}: {s:?}");
                !matches!(s.code(), Code::PermissionDenied | Code::Unauthenticated)
            }
        };
        let got = need(
            allowed(Some(&keys.read)).await,
            allowed(Some(&keys.write)).await,
            allowed(Some(&keys.review)).await,
            allowed(Some(&keys.admin)).await,
            allowed(None).await,
        );
        out.insert(name, got.to_owned());
    }
    let health = raw::call_path(
        &ch,
        "/grpc.health.v1.Health/Check",
        tonic::Request::new(Vec::new()),
        false,
    )
    .await;
    out.insert(
        "grpc.health.v1.Health/Check".into(),
        if health.code() == Code::Ok {
            "none"
        } else {
            "a key"
        }
        .into(),
    );
    out
}

async fn inspector(server: &TestServer, key: &str) -> SocketAddr {
    let client = connect(&ClientOptions {
        addr: server.url(),
        api_key: Some(key.to_owned()),
        ..ClientOptions::default()
    })
    .await
    .expect("connect");
    let inspector = Inspector::new(
        client,
        Settings {
            default_namespace: Some("ns".into()),
            ..Settings::default()
        },
    )
    .expect("inspector");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(mnemo::inspect::serve(
        inspector,
        listener,
        std::future::pending(),
    ));
    addr
}

/// Whether the inspector at `addr` lets `method path` through (anything
/// but 403); a POST carries this inspector's CSRF token and origin, so
/// only the daemon's answer can refuse it.
async fn route_allowed(addr: SocketAddr, method: &str, path: &str) -> bool {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let url = format!(
        "http://{addr}{}",
        path.replace("{ns}", "ns")
            .replace("{id}", "s")
            .replace("{subject}", "u")
            .replace("{file}", "nope.css")
            .replace("{review_id}", "r1")
    );
    // Parameters that make the page ask the daemon (without them the
    // search page is an empty form and the diff a bad request).
    let url = match path {
        "/ns/{ns}/search" => format!("{url}?q=refund"),
        "/ns/{ns}/sessions/{id}/diff" => format!("{url}?a=1&b=2"),
        _ => url,
    };
    let status = if method == "POST" {
        let page = http
            .get(format!("http://{addr}/static/nope.css"))
            .send()
            .await
            .unwrap();
        let cookie = page
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|v| v.starts_with("mnemo_csrf"))
            .expect("a CSRF cookie")
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        let token = cookie.split('=').nth(1).unwrap().to_owned();
        http.post(&url)
            .header("origin", format!("http://{addr}"))
            .header("cookie", cookie)
            .form(&[
                ("csrf", token.as_str()),
                ("decision", "approve"),
                ("reviewer", "probe"),
            ])
            .send()
            .await
            .unwrap()
            .status()
    } else {
        // Streams answer their headers at once; the body is not read.
        http.get(&url).send().await.unwrap().status()
    };
    assert_ne!(status.as_u16(), 500, "{method} {path}");
    status != 403
}

/// What the inspector's routes need of its key, route by route.
async fn route_needs(server: &TestServer, keys: &Keys) -> BTreeMap<String, String> {
    let mut c = connect(&ClientOptions {
        addr: server.url(),
        api_key: Some(keys.write.clone()),
        ..ClientOptions::default()
    })
    .await
    .unwrap();
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: "s".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let read = inspector(server, &keys.read).await;
    let write = inspector(server, &keys.write).await;
    let review = inspector(server, &keys.review).await;
    let admin = inspector(server, &keys.admin).await;
    let elsewhere = inspector(server, &keys.elsewhere).await;
    let mut out = BTreeMap::new();
    for (method, path) in mnemo::inspect::routes() {
        let got = need(
            route_allowed(read, method, path).await,
            route_allowed(write, method, path).await,
            route_allowed(review, method, path).await,
            route_allowed(admin, method, path).await,
            route_allowed(elsewhere, method, path).await,
        );
        out.insert(format!("{method} {path}"), got.to_owned());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_docs_access_table_says_what_the_code_enforces() {
    let tmp = tempfile::tempdir().unwrap();
    let mut config = config_for(&tmp.path().join("data"));
    let (auth, keys) = auth();
    config.auth = auth;
    let server = TestServer::start_with(config).await;
    let mut enforced = rpc_needs(&server, &keys).await;
    enforced.extend(route_needs(&server, &keys).await);
    let documented = docs_table();
    let mut wrong = Vec::new();
    for (call, needs) in &enforced {
        match documented.get(call) {
            Some(d) if d == needs => {}
            Some(d) => wrong.push(format!(
                "{call}: the docs say {d:?}, the code enforces {needs:?}"
            )),
            None => wrong.push(format!("{call}: missing from the docs (needs {needs:?})")),
        }
    }
    for call in documented.keys() {
        if !enforced.contains_key(call) {
            wrong.push(format!("{call}: in the docs, not served"));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/operations.md \"Who may call what\" is out of date:\n{}",
        wrong.join("\n")
    );
    server.stop().await;
}
