//! Long-term memory end to end through gRPC: facts (supersede, merge,
//! history, delete, limits), episodes and carried-over actions, bundles of
//! a subject's next session, search (scope, deletion, kinds) and the search
//! index across restarts, loss and damage.

mod common;

use common::*;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use tonic::transport::Channel;
use tonic::Code;

type Client = MemoryServiceClient<Channel>;

async fn put(
    c: &mut Client,
    ns: &str,
    subject: &str,
    key: &str,
    text: &str,
) -> pb::PutFactResponse {
    c.put_fact(pb::PutFactRequest {
        namespace: ns.into(),
        subject_id: subject.into(),
        key: key.into(),
        text: text.into(),
        ..Default::default()
    })
    .await
    .expect("put fact")
    .into_inner()
}

async fn facts(c: &mut Client, ns: &str, subject: &str, history: bool) -> Vec<pb::Fact> {
    c.list_facts(pb::ListFactsRequest {
        namespace: ns.into(),
        subject_id: subject.into(),
        include_history: history,
        ..Default::default()
    })
    .await
    .expect("list facts")
    .into_inner()
    .facts
}

async fn search(c: &mut Client, ns: &str, subject: &str, query: &str) -> pb::SearchResponse {
    c.search(search_request(ns, subject, query))
        .await
        .expect("search")
        .into_inner()
}

/// Searches until `pred` holds of the hits (the index catches up within a
/// fraction of a second; the deadline is generous for loaded machines).
async fn create_with_subject(c: &mut Client, ns: &str, id: &str, subject: &str) {
    c.create_session(pb::CreateSessionRequest {
        namespace: ns.into(),
        session_id: id.into(),
        subject_id: subject.into(),
        ..Default::default()
    })
    .await
    .expect("create");
}

async fn bundle(c: &mut Client, ns: &str, id: &str, budget: u32) -> pb::ContextBundle {
    c.get_context_bundle(pb::GetContextBundleRequest {
        namespace: ns.into(),
        session_id: id.into(),
        budget_tokens: budget,
        ..Default::default()
    })
    .await
    .expect("bundle")
    .into_inner()
    .bundle
    .expect("bundle in response")
}

#[tokio::test]
async fn facts_supersede_merge_keep_history_and_delete() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    let first = put(
        &mut c,
        "ns",
        "cust-1",
        "preferred_language",
        "Prefers Spanish.",
    )
    .await;
    assert_eq!(first.outcome, pb::PutFactOutcome::Created as i32);
    let f1 = first.fact.unwrap();
    assert_eq!(f1.origin, pb::FactOrigin::Client as i32);

    let second = put(
        &mut c,
        "ns",
        "cust-1",
        "preferred_language",
        "Prefers English since May.",
    )
    .await;
    assert_eq!(second.outcome, pb::PutFactOutcome::Superseded as i32);
    let f2 = second.fact.unwrap();
    let old = second.superseded.unwrap();
    assert_eq!(
        (old.fact_id.as_str(), old.superseded_by.as_str()),
        (f1.fact_id.as_str(), f2.fact_id.as_str())
    );
    assert_eq!(f2.supersedes, f1.fact_id);

    // The old version stays readable; only the current one is listed.
    let got = c
        .get_fact(pb::GetFactRequest {
            namespace: "ns".into(),
            fact_id: f1.fact_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .fact
        .unwrap();
    assert_eq!(
        (got.text.as_str(), got.superseded_by.as_str()),
        ("Prefers Spanish.", f2.fact_id.as_str())
    );
    let current = facts(&mut c, "ns", "cust-1", false).await;
    assert_eq!(
        current.iter().map(|f| f.text.as_str()).collect::<Vec<_>>(),
        ["Prefers English since May."]
    );
    assert_eq!(facts(&mut c, "ns", "cust-1", true).await.len(), 2);

    // Unkeyed facts with the same normalized words merge.
    let a = put(&mut c, "ns", "cust-1", "", "Has two dogs, Rex and Bo.").await;
    let b = put(&mut c, "ns", "cust-1", "", "has two dogs rex and bo").await;
    assert_eq!(b.outcome, pb::PutFactOutcome::Merged as i32);
    assert_eq!(b.fact.unwrap().fact_id, a.fact.unwrap().fact_id);
    assert_eq!(facts(&mut c, "ns", "cust-1", false).await.len(), 2);

    // Another subject and namespace see none of it.
    assert!(facts(&mut c, "ns", "cust-2", false).await.is_empty());
    assert!(facts(&mut c, "other", "cust-1", false).await.is_empty());

    // Delete the current version: the key has no current fact, history stays.
    c.delete_fact(pb::DeleteFactRequest {
        namespace: "ns".into(),
        fact_id: f2.fact_id.clone(),
    })
    .await
    .unwrap();
    let err = c
        .get_fact(pb::GetFactRequest {
            namespace: "ns".into(),
            fact_id: f2.fact_id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let current = facts(&mut c, "ns", "cust-1", false).await;
    assert!(
        current.iter().all(|f| f.key != "preferred_language"),
        "{current:?}"
    );
    let again = put(
        &mut c,
        "ns",
        "cust-1",
        "preferred_language",
        "Prefers French.",
    )
    .await;
    assert_eq!(again.outcome, pb::PutFactOutcome::Created as i32);
    let err = c
        .delete_fact(pb::DeleteFactRequest {
            namespace: "ns".into(),
            fact_id: f2.fact_id,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test]
async fn fact_requests_are_validated_and_change_nothing_when_bad() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_session(&mut c, "ns", "s1").await;
    c.append_turns(append_req("ns", "s1", vec![user_turn("hello")]))
        .await
        .unwrap();
    let base = pb::PutFactRequest {
        namespace: "ns".into(),
        subject_id: "u".into(),
        text: "x".into(),
        ..Default::default()
    };
    let limit = 4096;
    let cases: Vec<(&str, pb::PutFactRequest, Code)> = vec![
        (
            "no subject",
            pb::PutFactRequest {
                subject_id: String::new(),
                ..base.clone()
            },
            Code::InvalidArgument,
        ),
        (
            "no text",
            pb::PutFactRequest {
                text: " ".into(),
                ..base.clone()
            },
            Code::InvalidArgument,
        ),
        (
            "text over the limit",
            pb::PutFactRequest {
                text: "y".repeat(limit + 1),
                ..base.clone()
            },
            Code::InvalidArgument,
        ),
        (
            "bad key",
            pb::PutFactRequest {
                key: "Bad Key".into(),
                ..base.clone()
            },
            Code::InvalidArgument,
        ),
        (
            "17 tags",
            pb::PutFactRequest {
                tags: (0..17).map(|i| format!("t{i}")).collect(),
                ..base.clone()
            },
            Code::InvalidArgument,
        ),
        (
            "bad tag",
            pb::PutFactRequest {
                tags: vec!["a b".into()],
                ..base.clone()
            },
            Code::InvalidArgument,
        ),
        (
            "unknown source session",
            pb::PutFactRequest {
                source: Some(pb::FactSource {
                    session_id: "nope".into(),
                    seq: 1,
                    ..Default::default()
                }),
                ..base.clone()
            },
            Code::NotFound,
        ),
        (
            "source seq past the session",
            pb::PutFactRequest {
                source: Some(pb::FactSource {
                    session_id: "s1".into(),
                    seq: 2,
                    ..Default::default()
                }),
                ..base.clone()
            },
            Code::InvalidArgument,
        ),
    ];
    for (what, req, code) in cases {
        let err = c.put_fact(req).await.expect_err(what);
        assert_eq!(err.code(), code, "{what}: {}", err.message());
        assert!(!err.message().is_empty());
    }
    assert!(
        facts(&mut c, "ns", "u", true).await.is_empty(),
        "nothing stored"
    );
    // At the limits: accepted.
    let ok = pb::PutFactRequest {
        text: "y".repeat(limit),
        tags: (0..16).map(|i| format!("t{i}")).collect(),
        source: Some(pb::FactSource {
            session_id: "s1".into(),
            seq: 1,
            ..Default::default()
        }),
        ..base.clone()
    };
    c.put_fact(ok).await.expect("at the limits");

    let bad_search: Vec<(&str, pb::SearchRequest)> = vec![
        (
            "empty query",
            pb::SearchRequest {
                namespace: "ns".into(),
                query: "  ".into(),
                ..Default::default()
            },
        ),
        (
            "query too long",
            pb::SearchRequest {
                namespace: "ns".into(),
                query: "a".repeat(4097),
                ..Default::default()
            },
        ),
        (
            "limit over 100",
            pb::SearchRequest {
                namespace: "ns".into(),
                query: "a".into(),
                limit: 101,
                ..Default::default()
            },
        ),
        (
            "unknown kind",
            pb::SearchRequest {
                namespace: "ns".into(),
                query: "a".into(),
                kinds: vec![9],
                ..Default::default()
            },
        ),
    ];
    for (what, req) in bad_search {
        let err = c.search(req).await.expect_err(what);
        assert_eq!(err.code(), Code::InvalidArgument, "{what}");
    }
    for (query, limit) in [("a".repeat(4096), 100)] {
        c.search(pb::SearchRequest {
            namespace: "ns".into(),
            query,
            limit,
            ..Default::default()
        })
        .await
        .expect("at the limits");
    }
    let err = c
        .list_episodes(pb::ListEpisodesRequest {
            namespace: "ns".into(),
            subject_id: "u".into(),
            page_size: 101,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    let err = c
        .update_pending_action(pb::UpdatePendingActionRequest {
            namespace: "ns".into(),
            r#ref: Some(pb::PendingActionRef {
                session_id: "s1".into(),
                action_seq: 1,
            }),
            status: pb::ActionStatus::Done as i32,
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{}", err.message());
}

#[tokio::test]
async fn search_finds_turns_facts_and_episodes_within_scope_and_forgets_deletions() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_with_subject(&mut c, "acme", "s1", "cust-9").await;
    create_with_subject(&mut c, "globex", "s1", "cust-9").await;
    for ns in ["acme", "globex"] {
        c.append_turns(append_req(
            ns,
            "s1",
            vec![
                user_turn("The espresso machine leaks water from the boiler valve."),
                turn(
                    pb::Role::Assistant,
                    "agent",
                    "I will book a technician visit for the boiler.",
                ),
            ],
        ))
        .await
        .unwrap();
    }
    let hits = search_until(&mut c, "acme", "", "boiler leaking", |h| !h.is_empty()).await;
    assert_eq!(hits[0].kind, pb::SearchKind::Turn as i32);
    assert_eq!(
        (hits[0].session_id.as_str(), hits[0].seq),
        ("s1", 1),
        "{hits:?}"
    );
    assert_eq!(hits[0].role, pb::Role::User as i32);
    assert!(hits[0].snippet.contains("boiler"), "{}", hits[0].snippet);
    assert_eq!(hits.len(), 2, "only acme's two turns: {hits:?}");

    let fact = put(
        &mut c,
        "acme",
        "cust-9",
        "warranty",
        "Warranty runs until March 2027.",
    )
    .await
    .fact
    .unwrap();
    let hits = search_until(&mut c, "acme", "cust-9", "warranty", |h| !h.is_empty()).await;
    assert_eq!(
        (hits[0].kind, hits[0].fact_id.as_str()),
        (pb::SearchKind::Fact as i32, fact.fact_id.as_str())
    );

    // Kinds filter.
    let only_facts = c
        .search(pb::SearchRequest {
            namespace: "acme".into(),
            query: "boiler warranty".into(),
            kinds: vec![pb::SearchKind::Fact as i32],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .hits;
    assert!(
        !only_facts.is_empty()
            && only_facts
                .iter()
                .all(|h| h.kind == pb::SearchKind::Fact as i32)
    );

    // A superseding version replaces the old one in results.
    put(
        &mut c,
        "acme",
        "cust-9",
        "warranty",
        "Warranty was extended to March 2028.",
    )
    .await;
    let hits = search_until(&mut c, "acme", "cust-9", "warranty", |h| {
        h.iter().any(|x| x.snippet.contains("2028"))
    })
    .await;
    assert!(hits.iter().all(|h| !h.snippet.contains("2027")), "{hits:?}");

    // Episodes are searchable once the session closes.
    c.close_session(pb::CloseSessionRequest {
        namespace: "acme".into(),
        session_id: "s1".into(),
    })
    .await
    .unwrap();
    episodes_until(&mut c, "acme", "cust-9", 1).await;
    search_until(&mut c, "acme", "cust-9", "technician", |h| {
        h.iter()
            .any(|x| x.kind == pb::SearchKind::Episode as i32 && x.episode_id == "s1")
    })
    .await;

    // Deleting the session removes its turns and episode at once.
    c.delete_session(pb::DeleteSessionRequest {
        namespace: "acme".into(),
        session_id: "s1".into(),
    })
    .await
    .unwrap();
    let hits = search(&mut c, "acme", "", "boiler technician espresso")
        .await
        .hits;
    assert!(
        hits.iter().all(|h| h.kind == pb::SearchKind::Fact as i32),
        "{hits:?}"
    );
    // The other namespace's session is untouched.
    assert!(!search(&mut c, "globex", "", "boiler").await.hits.is_empty());
    // And the deleted fact version is gone from results at once.
    let current = facts(&mut c, "acme", "cust-9", false).await;
    for f in current {
        c.delete_fact(pb::DeleteFactRequest {
            namespace: "acme".into(),
            fact_id: f.fact_id,
        })
        .await
        .unwrap();
    }
    assert!(search(&mut c, "acme", "", "warranty").await.hits.is_empty());
}

#[tokio::test]
async fn a_second_session_starts_with_the_first_ones_facts_and_unfinished_actions() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_with_subject(&mut c, "shop", "visit-1", "cust-42").await;
    c.append_turns(append_req(
        "shop",
        "visit-1",
        vec![
            user_turn("Hi, my charger for order ORD-77120 stopped working."),
            turn(
                pb::Role::Assistant,
                "agent-a",
                "Sorry about that. I will ship a replacement charger for ORD-77120 by 2026-12-20.",
            ),
            user_turn(
                "Thanks. My preferred language is Portuguese. I prefer email over phone calls.",
            ),
            turn(pb::Role::Assistant, "agent-a", "Noted, we will email you."),
        ],
    ))
    .await
    .unwrap();
    c.close_session(pb::CloseSessionRequest {
        namespace: "shop".into(),
        session_id: "visit-1".into(),
    })
    .await
    .unwrap();
    let eps = episodes_until(&mut c, "shop", "cust-42", 1).await;
    let ep = &eps[0];
    assert_eq!(
        (ep.session_id.as_str(), ep.ended_as),
        ("visit-1", pb::SessionState::Closed as i32)
    );
    assert!(
        ep.pending_actions
            .iter()
            .any(|a| a.action.contains("replacement charger")),
        "{ep:?}"
    );

    // Extracted facts: the stated preference and the keyed statement.
    let fs = facts(&mut c, "shop", "cust-42", false).await;
    let lang = fs
        .iter()
        .find(|f| f.key == "preferred_language")
        .expect("keyed fact extracted");
    assert_eq!(lang.origin, pb::FactOrigin::Extracted as i32);
    assert_eq!(lang.sources[0].session_id, "visit-1");
    assert_eq!(lang.sources[0].seq, 3);
    assert!(
        fs.iter().any(|f| f.text.contains("I prefer email")),
        "{fs:?}"
    );

    // A client fact with the same key wins over later extraction.
    put(
        &mut c,
        "shop",
        "cust-42",
        "preferred_language",
        "Portuguese (Brazil), confirmed by phone.",
    )
    .await;

    // The second session's bundle carries facts, the open action and the episode.
    create_with_subject(&mut c, "shop", "visit-2", "cust-42").await;
    let b = bundle(&mut c, "shop", "visit-2", 4000).await;
    assert!(
        b.rendered_text.contains("Portuguese (Brazil)"),
        "{}",
        b.rendered_text
    );
    assert!(
        b.rendered_text.contains("I prefer email"),
        "{}",
        b.rendered_text
    );
    let charger = |b: &pb::ContextBundle| {
        b.carried_actions
            .iter()
            .find(|c| c.action.as_ref().unwrap().action.contains("ORD-77120"))
            .cloned()
    };
    let carried = charger(&b).unwrap_or_else(|| panic!("{}", b.rendered_text));
    let aref = carried.r#ref.clone().unwrap();
    assert_eq!(aref.session_id, "visit-1");
    assert_eq!(aref.action_seq, 2);
    assert!(b
        .rendered_text
        .contains("## Pending actions from earlier sessions"));
    assert_eq!(b.episodes.len(), 1);
    assert!(
        b.rendered_text.contains("Session visit-1"),
        "{}",
        b.rendered_text
    );
    assert!(b.facts.iter().all(|f| f.superseded_by.is_empty()));
    let sections: Vec<i32> = b
        .manifest
        .unwrap()
        .sections
        .iter()
        .map(|e| e.section)
        .collect();
    for s in [
        pb::BundleSection::CarriedActions,
        pb::BundleSection::Facts,
        pb::BundleSection::Episodes,
    ] {
        assert!(sections.contains(&(s as i32)), "{s:?} in {sections:?}");
    }

    // A small budget keeps the high-priority memory and lists what it cut.
    let small = bundle(&mut c, "shop", "visit-2", 256).await;
    assert!(small.token_count <= 256);
    assert!(charger(&small).is_some(), "{}", small.rendered_text);
    let m = small.manifest.unwrap();
    let omitted: u32 = m.sections.iter().map(|e| e.omitted + e.shortened).sum();
    assert!(!m.complete && omitted > 0, "{m:?}");

    // Session 2 reports the action done: the summarizer's completion rule
    // closes the carried action.
    c.append_turns(append_req(
        "shop",
        "visit-2",
        vec![
            user_turn("Did the charger ship?"),
            turn(
                pb::Role::Assistant,
                "agent-b",
                "Yes, I've shipped the replacement charger for ORD-77120 today.",
            ),
        ],
    ))
    .await
    .unwrap();
    c.summarize(pb::SummarizeRequest {
        namespace: "shop".into(),
        session_id: "visit-2".into(),
        wait: true,
    })
    .await
    .unwrap();
    let b = bundle(&mut c, "shop", "visit-2", 4000).await;
    assert!(charger(&b).is_none(), "{}", b.rendered_text);
    let eps = episodes_until(&mut c, "shop", "cust-42", 1).await;
    assert!(
        eps[0]
            .pending_actions
            .iter()
            .all(|a| !a.action.contains("ORD-77120")),
        "{:?}",
        eps[0]
    );

    // Marking it open again by hand brings it back; DONE removes it.
    let updated = c
        .update_pending_action(pb::UpdatePendingActionRequest {
            namespace: "shop".into(),
            r#ref: Some(aref.clone()),
            status: pb::ActionStatus::InProgress as i32,
        })
        .await
        .unwrap()
        .into_inner()
        .action
        .unwrap();
    assert_eq!(updated.status, pb::ActionStatus::InProgress as i32);
    let b = bundle(&mut c, "shop", "visit-2", 4000).await;
    assert!(charger(&b).is_some(), "{}", b.rendered_text);
    c.update_pending_action(pb::UpdatePendingActionRequest {
        namespace: "shop".into(),
        r#ref: Some(aref),
        status: pb::ActionStatus::Done as i32,
    })
    .await
    .unwrap();
    let b = bundle(&mut c, "shop", "visit-2", 4000).await;
    assert!(charger(&b).is_none(), "{}", b.rendered_text);
}

#[tokio::test]
async fn extraction_can_be_turned_off_per_session() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    c.create_session(pb::CreateSessionRequest {
        namespace: "ns".into(),
        session_id: "quiet".into(),
        subject_id: "u9".into(),
        settings: Some(pb::SessionSettings {
            fact_extraction: pb::FactExtraction::Disabled as i32,
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .unwrap();
    c.append_turns(append_req(
        "ns",
        "quiet",
        vec![user_turn("My email is u9@example.com. I prefer mornings.")],
    ))
    .await
    .unwrap();
    c.summarize(pb::SummarizeRequest {
        namespace: "ns".into(),
        session_id: "quiet".into(),
        wait: true,
    })
    .await
    .unwrap();
    assert!(facts(&mut c, "ns", "u9", true).await.is_empty());
    let s = get_session(&mut c, "ns", "quiet").await;
    assert_eq!(
        s.unwrap().settings.unwrap().fact_extraction,
        pb::FactExtraction::Disabled as i32
    );
}

#[tokio::test]
async fn the_index_survives_restart_and_rebuilds_when_lost_or_damaged() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    create_with_subject(&mut c, "ns", "s1", "u1").await;
    c.append_turns(append_req(
        "ns",
        "s1",
        vec![user_turn("The invoice INV-3301 was charged twice.")],
    ))
    .await
    .unwrap();
    put(&mut c, "ns", "u1", "plan", "On the Pro plan since 2025.").await;
    search_until(&mut c, "ns", "", "invoice charged twice", |h| !h.is_empty()).await;
    search_until(&mut c, "ns", "", "plan", |h| !h.is_empty()).await;
    drop(c);

    // Restart: the committed index is reused as is.
    let server = server.restart().await;
    let mut c = server.client().await;
    assert_eq!(search(&mut c, "ns", "", "invoice").await.hits.len(), 1);
    drop(c);

    // Lost: deleted while stopped, rebuilt at start.
    let dir = server.data_dir.clone();
    let tmp = server.stop().await;
    std::fs::remove_dir_all(dir.join(mnemo::server::SEARCH_INDEX_DIR)).unwrap();
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    search_until(&mut c, "ns", "", "invoice", |h| h.len() == 1).await;
    search_until(&mut c, "ns", "u1", "plan", |h| h.len() == 1).await;
    drop(c);

    // Damaged: garbage in its metadata; moved aside and rebuilt.
    server.stop().await;
    let meta = dir.join(mnemo::server::SEARCH_INDEX_DIR).join("meta.json");
    std::fs::write(&meta, b"{not json").unwrap();
    let server = TestServer::start_with(config_for(&dir)).await;
    let mut c = server.client().await;
    search_until(&mut c, "ns", "", "invoice", |h| h.len() == 1).await;
    search_until(&mut c, "ns", "u1", "plan", |h| h.len() == 1).await;
    drop(c);
    server.stop().await;
    drop(tmp);
}

#[tokio::test]
async fn deleting_a_session_forgets_the_facts_extracted_only_from_it() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    for id in ["a", "b"] {
        create_with_subject(&mut c, "ns", id, "u7").await;
    }
    let says = |id: &str, text: &str| append_req("ns", id, vec![user_turn(text)]);
    c.append_turns(says("a", "My shoe size is 44. I prefer aisle seats."))
        .await
        .unwrap();
    c.append_turns(says("b", "I prefer aisle seats."))
        .await
        .unwrap();
    for id in ["a", "b"] {
        c.summarize(pb::SummarizeRequest {
            namespace: "ns".into(),
            session_id: id.into(),
            wait: true,
        })
        .await
        .unwrap();
    }
    put(&mut c, "ns", "u7", "", "Client note: VIP since 2020.").await;
    let before = facts(&mut c, "ns", "u7", false).await;
    let aisle = before
        .iter()
        .find(|f| f.text.contains("aisle"))
        .expect("extracted");
    assert_eq!(
        aisle.sources.len(),
        2,
        "merged from both sessions: {before:?}"
    );
    assert!(before.iter().any(|f| f.key == "shoe_size"), "{before:?}");

    c.delete_session(pb::DeleteSessionRequest {
        namespace: "ns".into(),
        session_id: "a".into(),
    })
    .await
    .unwrap();
    let after = facts(&mut c, "ns", "u7", false).await;
    assert!(after.iter().all(|f| f.key != "shoe_size"), "{after:?}");
    let aisle = after
        .iter()
        .find(|f| f.text.contains("aisle"))
        .expect("still stated in b");
    assert_eq!(aisle.sources.len(), 1);
    assert_eq!(aisle.sources[0].session_id, "b");
    assert!(after.iter().any(|f| f.text.starts_with("Client note")));
    search_until(&mut c, "ns", "u7", "shoe size", |h| {
        h.iter()
            .all(|x| x.kind != pb::SearchKind::Fact as i32 || !x.snippet.contains("44"))
    })
    .await;
}
