//! Retrieval into context bundles, through gRPC on a real socket: what an
//! earlier session said comes back with its citation; an empty query
//! retrieves nothing; nothing of another subject or namespace and
//! nothing of a deleted session is retrieved; the newest interaction is
//! kept at every budget even when a summary is full of key facts; a short
//! session's bundle is its transcript.

mod common;

use common::*;
use mnemo::pb;
use mnemo::pb::memory_service_client::MemoryServiceClient;
use tonic::transport::Channel;

type Client = MemoryServiceClient<Channel>;

async fn session(c: &mut Client, ns: &str, id: &str, subject: &str) {
    c.create_session(pb::CreateSessionRequest {
        namespace: ns.into(),
        session_id: id.into(),
        subject_id: subject.into(),
        ..Default::default()
    })
    .await
    .unwrap();
}

async fn close(c: &mut Client, ns: &str, id: &str) {
    c.close_session(pb::CloseSessionRequest {
        namespace: ns.into(),
        session_id: id.into(),
    })
    .await
    .unwrap();
}

/// 8 May 2023, 13:56 UTC.
const MAY_8: i64 = 1_683_554_160;

/// Two subjects with a past session each (closed) and an open one.
async fn two_subjects(c: &mut Client, ns: &str) {
    session(c, ns, "ann-1", "ann").await;
    let past = vec![
        turn_at(
            pb::Role::User,
            "ann",
            "I finally adopted a dog last weekend!",
            MAY_8,
        ),
        turn_at(
            pb::Role::Assistant,
            "helper",
            "Congratulations! What did you name your dog?",
            MAY_8 + 30,
        ),
        turn_at(
            pb::Role::User,
            "ann",
            "We called him Biscuit, he is a beagle.",
            MAY_8 + 60,
        ),
        turn_at(
            pb::Role::Assistant,
            "helper",
            "Biscuit is a lovely name.",
            MAY_8 + 90,
        ),
    ];
    c.append_turns(append_req(ns, "ann-1", past)).await.unwrap();
    close(c, ns, "ann-1").await;
    session(c, ns, "bob-1", "bob").await;
    let other = vec![
        turn_at(
            pb::Role::User,
            "bob",
            "My dog is called Rocket and he hates baths.",
            MAY_8,
        ),
        turn_at(
            pb::Role::Assistant,
            "helper",
            "Rocket sounds energetic.",
            MAY_8 + 30,
        ),
    ];
    c.append_turns(append_req(ns, "bob-1", other))
        .await
        .unwrap();
    session(c, ns, "ann-2", "ann").await;
    let now = vec![
        turn_at(
            pb::Role::User,
            "ann",
            "Hi again, I need advice on puppy training.",
            MAY_8 + 86_400 * 30,
        ),
        turn_at(
            pb::Role::Assistant,
            "helper",
            "Happy to help with training.",
            MAY_8 + 86_400 * 30 + 30,
        ),
    ];
    c.append_turns(append_req(ns, "ann-2", now)).await.unwrap();
    index_caught_up(c, ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_that_does_not_fit_comes_back_as_the_sentences_that_answer() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    session(&mut c, "ns", "meet-1", "team").await;
    // A monologue of about 1,100 words; the answer is one sentence in it.
    let filler = "We went over the agenda, the minutes and the open tickets once more. ".repeat(40);
    let monologue =
        format!("{filler}The demo will be tested at the Students Firm Fair in March. {filler}");
    c.append_turns(append_req(
        "ns",
        "meet-1",
        vec![turn_at(pb::Role::User, "dana", &monologue, MAY_8)],
    ))
    .await
    .unwrap();
    close(&mut c, "ns", "meet-1").await;
    session(&mut c, "ns", "meet-2", "team").await;
    c.append_turns(append_req(
        "ns",
        "meet-2",
        vec![turn_at(
            pb::Role::User,
            "dana",
            "Where do we stand?",
            MAY_8 + 86_400,
        )],
    ))
    .await
    .unwrap();
    index_caught_up(&mut c, "ns").await;
    let b = query_bundle(
        &mut c,
        "ns",
        "meet-2",
        600,
        "Where will the demo be tested?",
    )
    .await;
    let text = &b.rendered_text;
    assert!(
        text.contains(
            "[8 May 2023] dana: … The demo will be tested at the Students Firm Fair in March. …\n"
        ),
        "{text}"
    );
    assert!(b.token_count <= 600);
    // The structured copy holds the whole turn.
    let r = b
        .recalled
        .iter()
        .find(|r| r.session_id == "meet-1")
        .expect("the monologue is retrieved");
    assert!(r.turns.iter().any(|t| t.content == monologue));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_sessions_answer_comes_back_with_its_reference() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    two_subjects(&mut c, "ns").await;
    let b = query_bundle(&mut c, "ns", "ann-2", 1000, "What is the name of my dog?").await;
    let text = &b.rendered_text;
    assert!(text.contains("Biscuit"), "{text}");
    // Read like memory: the day and the speaker, then the words; where it
    // is comes in the structured references, not in the text.
    assert!(
        text.contains("[8 May 2023] ann: We called him Biscuit, he is a beagle.\n"),
        "{text}"
    );
    assert!(text.contains("## Relevant memory"), "{text}");
    // Structured: the question/answer pair (whichever of the two matched),
    // with its rank.
    let r = b
        .recalled
        .iter()
        .find(|r| r.session_id == "ann-1" && r.turns.iter().any(|t| t.seq == 3))
        .expect("the answer turn is retrieved");
    assert!(r.rank >= 1);
    assert!(r.turns.iter().any(|t| t.seq == r.hit_seq));
    assert!(r.turns.iter().any(|t| t.content.contains("Biscuit")));
    // Another subject's dog never shows up.
    assert!(!text.contains("Rocket"), "{text}");
    assert!(b.recalled.iter().all(|r| r.session_id != "bob-1"));
    // The manifest counts the section.
    let m = b.manifest.unwrap();
    let e = m
        .sections
        .iter()
        .find(|e| e.section == pb::BundleSection::Recalled as i32)
        .expect("a RECALLED entry");
    assert_eq!(e.included + e.shortened, b.recalled.len() as u32);
    assert_eq!(e.available, e.included + e.shortened + e.omitted);
    assert_eq!(m.recalled_left_out.len() as u32, e.omitted);
    assert!(b.token_count <= 1000);

    // Without retrieval it is not there (the session is short: its
    // transcript, which never mentions the name).
    let without = c
        .get_context_bundle(pb::GetContextBundleRequest {
            namespace: "ns".into(),
            session_id: "ann-2".into(),
            budget_tokens: 1000,
            query: "What is the name of my dog?".into(),
            skip_recall: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .bundle
        .unwrap();
    assert!(!without.rendered_text.contains("Biscuit"));
    assert!(without.recalled.is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_query_retrieves_nothing_the_newest_turn_as_query_does_and_namespaces_stay_apart()
{
    let server = TestServer::start().await;
    let mut c = server.client().await;
    two_subjects(&mut c, "ns").await;
    // The same subject id in another namespace, with a dog of its own.
    session(&mut c, "other", "ann-x", "ann").await;
    c.append_turns(append_req(
        "other",
        "ann-x",
        vec![turn_at(
            pb::Role::User,
            "ann",
            "My beagle dog is named Pretzel.",
            MAY_8,
        )],
    ))
    .await
    .unwrap();
    index_caught_up(&mut c, "other").await;
    c.append_turns(append_req(
        "ns",
        "ann-2",
        vec![turn_at(
            pb::Role::User,
            "ann",
            "Is a beagle hard to train?",
            MAY_8 + 86_400 * 31,
        )],
    ))
    .await
    .unwrap();
    index_caught_up(&mut c, "ns").await;
    // Nothing asked, nothing retrieved: the bundle is what the session
    // and the subject's memory hold (so successive bundles share their
    // beginning and their end changes only by the as-of line).
    let b = query_bundle(&mut c, "ns", "ann-2", 1000, "").await;
    assert!(b.recalled.is_empty(), "{:?}", b.recalled);
    assert!(!b.rendered_text.contains("## Relevant memory"));
    // The newest user turn as the query brings the earlier session's
    // answer, and never another namespace's.
    let b = query_bundle(&mut c, "ns", "ann-2", 1000, "Is a beagle hard to train?").await;
    assert!(
        b.rendered_text.contains("he is a beagle"),
        "{}",
        b.rendered_text
    );
    assert!(!b.rendered_text.contains("Pretzel"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_sessions_turns_never_come_back() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    two_subjects(&mut c, "ns").await;
    c.delete_session(pb::DeleteSessionRequest {
        namespace: "ns".into(),
        session_id: "ann-1".into(),
    })
    .await
    .unwrap();
    // Asked at once, whatever the index has applied yet.
    for _ in 0..2 {
        let b = query_bundle(&mut c, "ns", "ann-2", 1000, "What is the name of my dog?").await;
        assert!(!b.rendered_text.contains("Biscuit"), "{}", b.rendered_text);
        assert!(b.recalled.iter().all(|r| r.session_id != "ann-1"));
        index_caught_up(&mut c, "ns").await;
    }
    server.stop().await;
}

/// A CI-debugging session in which every turn names a build, a job id and
/// an error code.
fn ci_turns(n: usize) -> Vec<pb::NewTurn> {
    (0..n)
        .map(|i| {
            if i % 2 == 0 {
                turn(
                    pb::Role::User,
                    "dev",
                    &format!(
                        "Build #{} failed again: job JOB-{} exited with E{:04} in stage test-{}. Can you check job JOB-{}?",
                        7000 + i,
                        20_000 + i,
                        1000 + i % 37,
                        i % 5,
                        20_000 + i
                    ),
                )
            } else {
                turn(
                    pb::Role::Assistant,
                    "ci-agent",
                    &format!(
                        "Job JOB-{} on build #{} shows E{:04} from the runner; retrying it now on runner r-{}.",
                        20_000 + i - 1,
                        7000 + i - 1,
                        1000 + (i - 1) % 37,
                        i % 9
                    ),
                )
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_newest_interactions_survive_every_budget() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    session(&mut c, "ns", "ci", "repo").await;
    let turns = ci_turns(200);
    let last_two: Vec<String> = turns[198..].iter().map(|t| t.content.clone()).collect();
    for chunk in turns.chunks(50) {
        c.append_turns(append_req("ns", "ci", chunk.to_vec()))
            .await
            .unwrap();
    }
    c.summarize(pb::SummarizeRequest {
        namespace: "ns".into(),
        session_id: "ci".into(),
        wait: true,
    })
    .await
    .unwrap();
    index_caught_up(&mut c, "ns").await;
    for budget in [1000, 2000, 4000, 8000] {
        let b = query_bundle(&mut c, "ns", "ci", budget, "").await;
        assert!(b.token_count <= budget);
        for content in &last_two {
            assert!(
                b.rendered_text.contains(content.as_str()),
                "budget {budget}: the last interaction is missing:\n{}",
                b.rendered_text
            );
        }
        let seqs: Vec<u64> = b.recent_turns.iter().map(|t| t.seq).collect();
        assert!(
            seqs.contains(&199) && seqs.contains(&200),
            "{budget}: {seqs:?}"
        );
        // No section takes everything: key facts stay within their share.
        let m = b.manifest.unwrap();
        let key_facts = m
            .sections
            .iter()
            .find(|e| e.section == pb::BundleSection::KeyFacts as i32)
            .map_or(0, |e| e.tokens);
        assert!(
            key_facts <= budget / 2,
            "budget {budget}: key facts took {key_facts}"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_sessions_bundle_is_its_transcript() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    session(&mut c, "ns", "short", "").await;
    let turns: Vec<pb::NewTurn> = (0..100)
        .map(|i| {
            if i % 2 == 0 {
                turn(
                    pb::Role::User,
                    "",
                    &format!("question number {i} about the plan?"),
                )
            } else {
                turn(pb::Role::Assistant, "", &format!("answer {i}: fine."))
            }
        })
        .collect();
    c.append_turns(append_req("ns", "short", turns.clone()))
        .await
        .unwrap();
    index_caught_up(&mut c, "ns").await;
    let transcript: String = turns
        .iter()
        .map(|t| {
            let role = if t.role == pb::Role::User as i32 {
                "user"
            } else {
                "assistant"
            };
            format!("{role}: {}\n", t.content)
        })
        .collect();
    let tokens = mnemo::tokens::count(mnemo::model::Encoding::Cl100kBase, &transcript) as u32;
    let b = query_bundle(&mut c, "ns", "short", 8000, "").await;
    let m = b.manifest.as_ref().unwrap();
    assert!(m.transcript, "{}", b.rendered_text);
    assert_eq!(b.recent_turns.len(), 100);
    // One header line first, the point in time last (the request's part,
    // so that the transcript is a prefix successive bundles share).
    let header = b.rendered_text.lines().next().unwrap();
    let as_of = b.rendered_text.lines().last().unwrap();
    assert!(as_of.starts_with("As of turn 100"), "{as_of}");
    let header_tokens = mnemo::tokens::count(
        mnemo::model::Encoding::Cl100kBase,
        &format!("{header}\n{as_of}\n"),
    ) as u32;
    assert!(
        b.token_count <= tokens + header_tokens,
        "bundle {} > transcript {tokens} + header and as-of line {header_tokens}",
        b.token_count
    );
    assert_eq!(b.rendered_text.lines().count(), 102);
    server.stop().await;
}
