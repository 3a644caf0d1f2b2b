//! The web inspector (`mnemo inspect`) end to end: a real daemon with API
//! keys, the inspector in front of it (one with a writer's key, one with a
//! reader's), and a real headless Chromium driven over WebDriver.
//!
//! Needs `chromium` and `chromedriver` (Debian: `chromium chromium-driver`);
//! without them the browser test says so and passes, unless
//! MNEMO_REQUIRE_BROWSER=1 (CI) makes it fail. With
//! MNEMO_INSPECTOR_SCREENSHOTS=DIR it writes the screenshots of the main
//! pages that docs/inspector.md shows into DIR.

mod browser;
mod common;

use std::net::SocketAddr;
use std::time::Instant;

use mnemo::client::{connect, ClientOptions, MemoryClient};
use mnemo::inspect::{Inspector, Settings, MAX_LIVE_STREAMS};
use mnemo::pb;
use mnemo::server::auth::{new_key, AuthConfig, KeyConfig, Permission, Role};
use serde_json::json;

use browser::Browser;
use common::{config_for, TestServer};

const NS: &str = "ns";
/// Turns of the long session whose page loads are timed.
const LONG_TURNS: u64 = 10_000;

struct Keys {
    writer: String,
    reader: String,
}

async fn daemon() -> (TestServer, Keys, tempfile::TempDir) {
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut config = config_for(&tmp.path().join("data"));
    let mut auth = AuthConfig::default();
    let mut make = |name: &str, role: Role| {
        let (key, sha256) = new_key().expect("key");
        auth.keys.push(KeyConfig {
            name: name.into(),
            namespace: NS.into(),
            role,
            // The inspector's writer also reviews (the review queue's
            // controls need the permission, see review_permission.rs).
            permissions: if role == Role::Write {
                vec![Permission::Review]
            } else {
                vec![]
            },
            sha256,
        });
        key
    };
    let keys = Keys {
        writer: make("writer", Role::Write),
        reader: make("reader", Role::Read),
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

/// Serves an inspector with `key` on a loopback port of this runtime.
async fn inspector(server: &TestServer, key: &str) -> SocketAddr {
    inspector_with(server, key, MAX_LIVE_STREAMS).await
}

async fn inspector_with(server: &TestServer, key: &str, max_live_streams: usize) -> SocketAddr {
    let settings = Settings {
        default_namespace: Some(NS.into()),
        allowed_hosts: Vec::new(),
        max_live_streams,
    };
    let inspector = Inspector::new(client(server, key).await, settings).expect("inspector");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(mnemo::inspect::serve(
        inspector,
        listener,
        std::future::pending(),
    ));
    addr
}

fn turn(role: pb::Role, speaker: &str, content: &str) -> pb::NewTurn {
    pb::NewTurn {
        role: role as i32,
        speaker: speaker.into(),
        content: content.into(),
        ..Default::default()
    }
}

/// A high-risk support session whose summary holds a refund (so it enters
/// the review queue), a failed tool call and a turn carrying HTML and JS.
async fn support_session(c: &mut MemoryClient, id: &str) {
    c.create_session(pb::CreateSessionRequest {
        namespace: NS.into(),
        session_id: id.into(),
        subject_id: "user:42".into(),
        title: "Double charge on order A-1001".into(),
        owner_agent: "agent-billing".into(),
        settings: Some(pb::SessionSettings {
            risk_level: pb::RiskLevel::High as i32,
            summary_every_turns: 1000,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .expect("create");
    let mut failed = turn(
        pb::Role::Assistant,
        "agent-billing",
        "Looking up the order.",
    );
    failed.tool_call = Some(pb::ToolCall {
        tool_name: "lookup_order".into(),
        arguments_json: r#"{"order_id": "A-1001"}"#.into(),
        result: String::new(),
        status: pb::ToolCallStatus::Failure as i32,
        error_details: "billing service timed out after 30s".into(),
    });
    let turns = vec![
        turn(pb::Role::User, "user:42", "Hi, I was charged twice for order A-1001. Please refund the duplicate charge."),
        failed,
        turn(pb::Role::Assistant, "agent-billing", "I will refund the duplicate charge of $40 on order A-1001 by Friday."),
        turn(pb::Role::User, "user:42", "My note: <script>window.__xss = 1</script><img src=x onerror=\"window.__xss = 2\"> <b>thanks</b>"),
        turn(pb::Role::Assistant, "agent-billing", "Which email address is on the account?"),
        turn(pb::Role::User, "user:42", "It is jane@example.com, and I prefer email over phone calls."),
        turn(pb::Role::Assistant, "agent-billing", "Thanks. We decided to refund to the original card because it is the fastest way."),
        turn(pb::Role::User, "user:42", "Great. Will I get a confirmation email when the refund goes through?"),
    ];
    c.append_turns(pb::AppendTurnsRequest {
        namespace: NS.into(),
        session_id: id.into(),
        turns,
        ..Default::default()
    })
    .await
    .expect("append");
    c.summarize(pb::SummarizeRequest {
        namespace: NS.into(),
        session_id: id.into(),
        wait: true,
    })
    .await
    .expect("summarize");
}

/// An earlier, closed session of the same subject: it leaves an episode.
async fn earlier_session(c: &mut MemoryClient) {
    c.create_session(pb::CreateSessionRequest {
        namespace: NS.into(),
        session_id: "earlier".into(),
        subject_id: "user:42".into(),
        title: "Receipts by email".into(),
        owner_agent: "agent-billing".into(),
        ..Default::default()
    })
    .await
    .expect("create earlier");
    let turns = vec![
        turn(
            pb::Role::User,
            "user:42",
            "Can you send my receipts by email from now on?",
        ),
        turn(
            pb::Role::Assistant,
            "agent-billing",
            "Yes. I will switch your receipts to email today.",
        ),
    ];
    c.append_turns(pb::AppendTurnsRequest {
        namespace: NS.into(),
        session_id: "earlier".into(),
        turns,
        ..Default::default()
    })
    .await
    .expect("append earlier");
    c.close_session(pb::CloseSessionRequest {
        namespace: NS.into(),
        session_id: "earlier".into(),
    })
    .await
    .expect("close earlier");
}

/// A session of `LONG_TURNS` short question/answer turns with one summary.
async fn long_session(c: &mut MemoryClient) {
    c.create_session(pb::CreateSessionRequest {
        namespace: NS.into(),
        session_id: "long".into(),
        subject_id: "user:7".into(),
        title: "A very long session".into(),
        owner_agent: "agent-docs".into(),
        settings: Some(pb::SessionSettings {
            summary_every_turns: 10_000,
            context_limit_tokens: 10_000_000,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .expect("create long");
    let mut seq = 1;
    while seq <= LONG_TURNS {
        let turns = (seq..(seq + 250).min(LONG_TURNS + 1))
            .map(|i| {
                if i % 2 == 1 {
                    turn(
                        pb::Role::User,
                        "user:7",
                        &format!("Question {i}: how do I set option {i} for the exporter?"),
                    )
                } else {
                    turn(
                        pb::Role::Assistant,
                        "agent-docs",
                        &format!("Answer {i}: set option {i} to {} in exporter.toml.", i * 7),
                    )
                }
            })
            .collect::<Vec<_>>();
        seq += turns.len() as u64;
        c.append_turns(pb::AppendTurnsRequest {
            namespace: NS.into(),
            session_id: "long".into(),
            turns,
            ..Default::default()
        })
        .await
        .expect("append long");
    }
    c.summarize(pb::SummarizeRequest {
        namespace: NS.into(),
        session_id: "long".into(),
        wait: true,
    })
    .await
    .expect("summarize long");
}

async fn review_items(c: &mut MemoryClient) -> Vec<pb::ReviewItem> {
    c.list_review_items(pb::ListReviewItemsRequest {
        namespace: NS.into(),
        include_resolved: true,
        ..Default::default()
    })
    .await
    .expect("review items")
    .into_inner()
    .items
}

async fn screenshot(b: &Browser, name: &str) {
    if let Ok(dir) = std::env::var("MNEMO_INSPECTOR_SCREENSHOTS") {
        let png = b.screenshot().await;
        let path = std::path::Path::new(&dir).join(format!("inspector-{name}.png"));
        std::fs::write(&path, png).expect("write screenshot");
    }
}

/// The name of the CSRF cookie of the inspector at `base`: one per port.
fn cookie_name(base: &str) -> String {
    format!("mnemo_csrf_{}", base.rsplit(':').next().unwrap_or_default())
}

/// The CSRF token an inspector hands out in its cookie.
async fn csrf_token(http: &reqwest::Client, base: &str) -> String {
    let r = http
        .get(format!("{base}/ns/{NS}/review"))
        .send()
        .await
        .expect("GET");
    let cookie = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{}=", cookie_name(base))))
        .expect("csrf cookie named after the port")
        .to_owned();
    cookie.split(';').next().unwrap_or_default().to_owned()
}

/// Median and largest of the page's own load times over `runs` loads
/// (navigation timing: request start to the load event), and the median
/// of the inspector's part (request start to the last byte of the HTML),
/// in ms.
async fn time_page(b: &Browser, url: &str, runs: usize) -> (f64, f64, f64) {
    let mut load = Vec::new();
    let mut server = Vec::new();
    for _ in 0..runs {
        b.goto(url).await;
        let v = b
            .run(
                "const n = performance.getEntriesByType('navigation')[0]; \
                 return [n.loadEventEnd - n.startTime, n.responseEnd - n.requestStart];",
                json!([]),
            )
            .await;
        load.push(v[0].as_f64().expect("a duration"));
        server.push(v[1].as_f64().expect("a duration"));
    }
    load.sort_by(f64::total_cmp);
    server.sort_by(f64::total_cmp);
    (load[runs / 2], load[runs - 1], server[runs / 2])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inspector_in_a_real_browser() {
    let (driver, chromium) = match browser::find() {
        Ok(found) => found,
        Err(why) => {
            assert!(
                std::env::var("MNEMO_REQUIRE_BROWSER").as_deref() != Ok("1"),
                "MNEMO_REQUIRE_BROWSER=1 but {why}"
            );
            eprintln!("skipped: {why} (install Debian's chromium and chromium-driver)");
            return;
        }
    };
    let (server, keys, _tmp) = daemon().await;
    let mut c = client(&server, &keys.writer).await;
    support_session(&mut c, "support-1").await;
    support_session(&mut c, "support-2").await;
    earlier_session(&mut c).await;
    for text in ["Prefers English", "Prefers email over phone calls"] {
        c.put_fact(pb::PutFactRequest {
            namespace: NS.into(),
            subject_id: "user:42".into(),
            key: "contact_preference".into(),
            text: text.into(),
            ..Default::default()
        })
        .await
        .expect("put fact");
    }
    let seeded = Instant::now();
    long_session(&mut c).await;
    eprintln!("seeded {LONG_TURNS} turns in {:?}", seeded.elapsed());
    let items = review_items(&mut c).await;
    assert_eq!(
        items.len(),
        2,
        "each support session enters the review queue: {items:?}"
    );

    let writer = inspector(&server, &keys.writer).await;
    let reader = inspector(&server, &keys.reader).await;
    let w = format!("http://{writer}");
    let r = format!("http://{reader}");
    let b = Browser::start(&driver, &chromium).await;

    // 1. The sessions list, then a session.
    b.goto(&format!("{w}/")).await;
    assert!(
        b.url().await.ends_with("/ns/ns/sessions"),
        "/ leads to the default namespace"
    );
    let totals = b.find("#totals").await.text().await;
    assert!(totals.starts_with("4 sessions"), "{totals}");
    assert!(totals.contains("1 closed"), "{totals}");
    assert!(
        totals.contains(&format!("{} turns", LONG_TURNS + 18)),
        "{totals}"
    );
    screenshot(&b, "sessions").await;
    b.goto(&format!("{w}/ns/ns/sessions?owner=agent-docs"))
        .await;
    let owned = b.find("#totals").await.text().await;
    assert!(owned.starts_with("1 sessions"), "{owned}");
    b.goto(&format!("{w}/ns/ns/sessions?state=closed")).await;
    assert_eq!(b.count("#sessions tbody tr").await, 1);
    b.find("#sessions a[href='/ns/ns/sessions/earlier']").await;
    b.goto(&format!("{w}/ns/ns/sessions")).await;
    b.find("#sessions a[href='/ns/ns/sessions/support-1']")
        .await
        .click()
        .await;
    b.wait_for(
        "the session page",
        10,
        "return !!document.querySelector('#summary');",
    )
    .await;
    assert!(b.url().await.ends_with("/ns/ns/sessions/support-1"));

    // 2. Turns render inert: the script and the handler are text.
    let inert = b.find("#t4 pre.content").await.text().await;
    assert!(
        inert.contains("<script>window.__xss = 1</script>"),
        "{inert}"
    );
    assert!(inert.contains("<b>thanks</b>"), "{inert}");
    assert_eq!(b.count("#turns script, #turns img, #turns b").await, 0);
    assert_eq!(
        b.run("return window.__xss === undefined;", json!([])).await,
        json!(true)
    );
    // The failed tool call is highlighted with its arguments and error.
    assert_eq!(b.count("#t2.error").await, 1);
    let call = b.find("#t2 .tool-call").await.text().await;
    assert!(
        call.contains("lookup_order") && call.contains("\"order_id\": \"A-1001\""),
        "{call}"
    );
    assert!(call.contains("billing service timed out"), "{call}");
    screenshot(&b, "session").await;

    // 3. A summary item's citation leads to its turn, highlighted.
    let cite = b.find("#summary a.cite").await;
    let label = cite.text().await;
    let seq: u64 = label.trim_start_matches('#').parse().expect("a seq");
    cite.click().await;
    b.wait_for(
        "the cited turn as the target",
        5,
        &format!("const t = document.querySelector(':target'); return !!t && t.id === 't{seq}';"),
    )
    .await;
    let bg = b
        .run(
            &format!("return getComputedStyle(document.getElementById('t{seq}')).backgroundColor;"),
            json!([]),
        )
        .await;
    assert_eq!(
        bg,
        json!("rgb(255, 243, 176)"),
        "the cited turn is highlighted"
    );

    // 4. A turn appended over gRPC appears live.
    b.goto(&format!("{w}/ns/ns/sessions/support-1")).await;
    b.wait_for(
        "the live stream",
        10,
        "return document.getElementById('live-status').textContent === 'live';",
    )
    .await;
    c.append_turns(pb::AppendTurnsRequest {
        namespace: NS.into(),
        session_id: "support-1".into(),
        turns: vec![turn(
            pb::Role::User,
            "user:42",
            "When will the refund for order A-1001 reach my card? <i>still waiting</i>",
        )],
        ..Default::default()
    })
    .await
    .expect("append live");
    b.wait_for("the new turn on the page", 10, "const t = document.getElementById('t9'); return !!t && t.textContent.includes('<i>still waiting</i>');").await;
    assert_eq!(b.count("#turns i").await, 0, "the live turn is escaped too");
    // A new summary version shows up as a notice, and its diff against the
    // previous version lists what changed.
    c.summarize(pb::SummarizeRequest {
        namespace: NS.into(),
        session_id: "support-1".into(),
        wait: true,
    })
    .await
    .expect("summarize again");
    b.wait_for(
        "the summary notice",
        10,
        "return document.getElementById('live-notices').textContent.includes('Summary v2 written');",
    )
    .await;
    b.goto(&format!("{w}/ns/ns/sessions/support-1")).await;
    b.find("#versions a.diff-link").await.click().await;
    b.wait_for(
        "the diff page",
        10,
        "return !!document.getElementById('diff');",
    )
    .await;
    assert!(b.find("h1").await.text().await.ends_with("summary v1 → v2"));
    assert!(
        b.count("#diff li.added, #diff li.removed").await > 0,
        "v2 covers a turn more than v1"
    );

    // 5. The bundle preview: a smaller budget changes the manifest.
    b.goto(&format!("{w}/ns/ns/sessions/support-1/bundle?budget=4000"))
        .await;
    // The bundle's text carries turn 4 verbatim, inert here too.
    assert!(b
        .find("#bundle-text")
        .await
        .text()
        .await
        .contains("<script>window.__xss = 1</script>"));
    assert_eq!(b.count("#bundle-text *").await, 0);
    assert_eq!(
        b.run("return window.__xss === undefined;", json!([])).await,
        json!(true)
    );
    let roomy = b.find("#manifest").await.text().await;
    let roomy_tokens = b.find("#bundle-tokens").await.text().await;
    b.find("#budget").await.type_text("256").await;
    b.find("#bundle-submit").await.click().await;
    b.wait_for(
        "the manifest for 256 tokens",
        10,
        "return document.getElementById('bundle-usage').textContent.includes('of 256 tokens');",
    )
    .await;
    let tight = b.find("#manifest").await.text().await;
    let tight_tokens: u32 = b
        .find("#bundle-tokens")
        .await
        .text()
        .await
        .parse()
        .expect("tokens");
    assert!(tight_tokens <= 256, "{tight_tokens}");
    assert_ne!(
        roomy, tight,
        "the manifest changes with the budget ({roomy_tokens} vs {tight_tokens} tokens)"
    );
    screenshot(&b, "bundle").await;
    assert!(
        b.url().await.contains("budget=256"),
        "the form's state is in the URL"
    );

    // 6. Subject and search.
    b.goto(&format!("{w}/ns/ns/subjects/user%3A42")).await;
    let facts = b.find("#facts").await.text().await;
    assert!(facts.contains("Prefers email over phone calls"), "{facts}");
    assert_eq!(
        b.count("#episodes tbody tr").await,
        1,
        "the closed session's episode"
    );
    assert_eq!(
        b.count("#facts ul.history del").await,
        1,
        "the superseded version shows as history"
    );
    screenshot(&b, "subject").await;
    b.goto(&format!("{w}/ns/ns/search?q=refund+duplicate"))
        .await;
    assert!(b.count("#hits a.hit").await > 0);
    b.find("#hits a.hit[href*='support-']").await.click().await;
    b.wait_for(
        "a hit's turn as the target",
        10,
        "const t = document.querySelector(':target'); return !!t && t.classList.contains('turn');",
    )
    .await;

    // 7. Review: the reader's inspector shows no controls and its forged
    // decision is refused by the daemon; the writer's is not.
    let http = reqwest::Client::new();
    b.goto(&format!("{r}/ns/ns/review")).await;
    assert_eq!(b.count("#read-only").await, 1);
    assert_eq!(b.count("#review-items form, button.approve").await, 0);
    let target = &items[0].review_id;
    let token = csrf_token(&http, &r).await;
    let forged = http
        .post(format!("{r}/ns/ns/review/{target}"))
        .header("origin", &r)
        .header("cookie", format!("{}={token}", cookie_name(&r)))
        .form(&[
            ("csrf", token.as_str()),
            ("decision", "approve"),
            ("reviewer", "mallory"),
        ])
        .send()
        .await
        .expect("POST");
    assert_eq!(forged.status(), 403);
    assert!(forged
        .text()
        .await
        .expect("body")
        .contains("PermissionDenied"));
    // The writer's inspector refuses writes without its token or from
    // another origin, and requests for other host names.
    let wtoken = csrf_token(&http, &w).await;
    for (origin, cookie, field) in [
        (w.as_str(), String::new(), ""),
        (
            "http://evil.example",
            format!("{}={wtoken}", cookie_name(&w)),
            wtoken.as_str(),
        ),
        (w.as_str(), format!("{}={wtoken}", cookie_name(&w)), "0000"),
    ] {
        let resp = http
            .post(format!("{w}/ns/ns/review/{target}"))
            .header("origin", origin)
            .header("cookie", cookie)
            .form(&[
                ("csrf", field),
                ("decision", "approve"),
                ("reviewer", "mallory"),
            ])
            .send()
            .await
            .expect("POST");
        assert_eq!(resp.status(), 403, "origin {origin}, token {field:?}");
    }
    let rebound = http
        .get(format!("{w}/ns/ns/sessions"))
        .header("host", "evil.example")
        .send()
        .await
        .expect("GET");
    assert_eq!(rebound.status(), 421);
    assert!(review_items(&mut c)
        .await
        .iter()
        .all(|i| i.status == pb::ReviewStatus::Pending as i32));

    b.goto(&format!("{w}/ns/ns/review")).await;
    screenshot(&b, "review").await;
    b.find(&format!("#review-{target} input[name=reviewer]"))
        .await
        .type_text("dana")
        .await;
    b.find(&format!("#review-{target} button.approve"))
        .await
        .click()
        .await;
    b.wait_for("the approval", 10, &format!(
        "const r = document.getElementById('review-{target}'); return !!r && r.textContent.includes('approved');"
    ))
    .await;
    let after = review_items(&mut c).await;
    let approved = after.iter().find(|i| &i.review_id == target).expect("item");
    assert_eq!(approved.status, pb::ReviewStatus::Approved as i32);
    assert_eq!(approved.reviewer, "dana");
    assert!(
        after
            .iter()
            .any(|i| i.status == pb::ReviewStatus::Pending as i32),
        "the other stays pending"
    );

    // Handoff history, read on demand (htmx).
    c.handoff(pb::HandoffRequest {
        namespace: NS.into(),
        session_id: "support-2".into(),
        from_agent: "agent-billing".into(),
        to_agent: "agent-refunds".into(),
        reason: "refunds team owns card refunds".into(),
        lease_epoch: 1,
        ..Default::default()
    })
    .await
    .expect("handoff");
    b.goto(&format!("{w}/ns/ns/sessions/support-2")).await;
    b.find("#handoffs button").await.click().await;
    b.wait_for(
        "the handoff history",
        10,
        "const h = document.querySelector('#handoffs table'); return !!h && h.textContent.includes('agent-refunds') && h.textContent.includes('refunds team owns card refunds');",
    )
    .await;

    // 8. Page loads for a session of 10,000 turns, beside the RPCs the
    // session page makes, timed from here.
    let mut rpc_ms = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let s = c
            .get_session(pb::GetSessionRequest {
                namespace: NS.into(),
                session_id: "long".into(),
            })
            .await
            .expect("get")
            .into_inner()
            .session
            .expect("session");
        let turns = c
            .list_turns(pb::ListTurnsRequest {
                namespace: NS.into(),
                session_id: "long".into(),
                from_seq: s.next_seq - 100,
                to_seq: s.next_seq - 1,
                page_size: 100,
                ..Default::default()
            })
            .await
            .expect("turns")
            .into_inner();
        assert_eq!(turns.turns.len(), 100);
        c.get_summary(pb::GetSummaryRequest {
            namespace: NS.into(),
            session_id: "long".into(),
            ..Default::default()
        })
        .await
        .expect("summary");
        c.list_summaries(pb::ListSummariesRequest {
            namespace: NS.into(),
            session_id: "long".into(),
            ..Default::default()
        })
        .await
        .expect("versions");
        c.get_audit_log(pb::GetAuditLogRequest {
            namespace: NS.into(),
            session_id: "long".into(),
            page_size: 1000,
            ..Default::default()
        })
        .await
        .expect("audit");
        rpc_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    rpc_ms.sort_by(f64::total_cmp);
    let pages = [
        ("sessions list", format!("{w}/ns/ns/sessions")),
        ("session, last page", format!("{w}/ns/ns/sessions/long")),
        (
            "session, middle page",
            format!("{w}/ns/ns/sessions/long?from=5001"),
        ),
        (
            "bundle preview, 8000 tokens",
            format!("{w}/ns/ns/sessions/long/bundle?budget=8000"),
        ),
    ];
    eprintln!(
        "baseline: the session page's RPCs from the test: median {:.1} ms, max {:.1} ms",
        rpc_ms[2], rpc_ms[4]
    );
    for (name, url) in &pages {
        let (median, max, server) = time_page(&b, url, 5).await;
        eprintln!(
            "page load, {LONG_TURNS}-turn session, {name}: median {median:.1} ms, max {max:.1} ms \
             (the inspector's HTML: median {server:.1} ms)"
        );
        assert!(max < 3000.0, "{name} took {max} ms");
    }
    assert_eq!(
        b.count("#turns li.turn").await,
        0,
        "the bundle page shows no turns list"
    );
    b.goto(&format!("{w}/ns/ns/sessions/long?from=5001")).await;
    assert_eq!(b.count("#turns li.turn").await, 100, "one page of turns");
    assert_eq!(b.find("#t5001 .speaker").await.text().await, "user:7");
    b.quit().await;
}

#[test]
fn the_inspector_refuses_a_non_loopback_address() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mnemo"))
        .args([
            "inspect",
            "--http",
            "0.0.0.0:0",
            "--addr",
            "http://127.0.0.1:1",
        ])
        .env_remove("MNEMO_INSPECT_HTTP")
        .output()
        .expect("run mnemo");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("non-loopback") && err.contains("--allow-remote"),
        "{err}"
    );
}

#[tokio::test]
async fn pages_answer_with_the_daemons_status() {
    let (server, keys, _tmp) = daemon().await;
    let w = format!("http://{}", inspector(&server, &keys.writer).await);
    let http = reqwest::Client::new();
    let missing = http
        .get(format!("{w}/ns/ns/sessions/nope"))
        .send()
        .await
        .expect("GET");
    assert_eq!(missing.status(), 404);
    let bad = http
        .get(format!("{w}/ns/ns/sessions?since=yesterday"))
        .send()
        .await
        .expect("GET");
    assert_eq!(bad.status(), 400);
    let budget = http
        .get(format!("{w}/ns/ns/sessions/nope/bundle?budget=5"))
        .send()
        .await
        .expect("GET");
    assert_eq!(budget.status(), 400);
    let other = http
        .get(format!("{w}/ns/other/sessions"))
        .send()
        .await
        .expect("GET");
    assert_eq!(other.status(), 403, "the key is for namespace ns only");
    let page = http
        .get(format!("{w}/ns/ns/sessions"))
        .send()
        .await
        .expect("GET");
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(csp.contains("script-src 'self'"), "{csp}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_streams_are_bounded_and_free_their_place() {
    let (server, keys, _tmp) = daemon().await;
    let mut c = client(&server, &keys.writer).await;
    c.create_session(pb::CreateSessionRequest {
        namespace: NS.into(),
        session_id: "s".into(),
        ..Default::default()
    })
    .await
    .expect("create");
    let w = format!("http://{}", inspector_with(&server, &keys.writer, 2).await);
    let http = reqwest::Client::new();
    let url = format!("{w}/ns/ns/sessions/s/events?after=0");
    let open = |http: reqwest::Client, url: String| async move {
        http.get(url).send().await.expect("GET events")
    };
    let first = open(http.clone(), url.clone()).await;
    let second = open(http.clone(), url.clone()).await;
    assert_eq!(first.status(), 200);
    assert_eq!(second.status(), 200);
    assert_eq!(
        first.headers()["content-type"].to_str().expect("ascii"),
        "text/event-stream"
    );
    let third = open(http.clone(), url.clone()).await;
    assert_eq!(third.status(), 503, "a third stream is over the bound of 2");
    drop(first);
    // The closed stream's task notices and gives its place back.
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let again = open(http.clone(), url.clone()).await;
        if again.status() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the closed stream's place never came back"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    drop(second);
}
