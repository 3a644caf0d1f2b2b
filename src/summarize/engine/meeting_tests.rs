//! Unit tests of the fold on meeting talk: proposals accepted by another
//! speaker, short decisions that point back, and the bound on how many
//! decisions and actions a long meeting shows.

use super::*;
use crate::model::Trigger;

fn said(seq: u64, speaker: &str, content: &str) -> Turn {
    Turn {
        seq,
        role: Role::User,
        speaker: speaker.to_string(),
        content: content.to_string(),
        client_time: None,
        server_time: 1_773_741_600_000_000_000 + i64::try_from(seq).unwrap_or(0) * 10_000_000_000,
        tool_call: None,
        metadata: BTreeMap::new(),
        token_count: 1,
    }
}

fn summary(turns: &[Turn]) -> SessionSummary {
    let mut s = FoldState::default();
    s.fold(turns);
    s.render(&SummaryContext {
        namespace: String::new(),
        context_limit_tokens: 128_000,
        bundle_tokens: 0,
        trigger: Trigger::Close,
        version: 1,
        now: 0,
        high_risk: false,
        wait_free: false,
    })
}

#[test]
fn a_proposal_accepted_by_another_speaker_is_a_decision_of_both() {
    let turns = [
        said(
            1,
            "PERSON2",
            "So what do we do with the battery {disfmarker} ?",
        ),
        said(
            2,
            "PERSON1",
            "Um I think we should put a charging cradle in the box. \
             That would be cheaper than spare batteries. Right?",
        ),
        said(3, "PERSON2", "Yeah, yeah. {vocalsound} I'm fine with that."),
    ];
    let s = summary(&turns);
    let d = s
        .decisions
        .iter()
        .find(|d| d.decision.contains("charging cradle"))
        .unwrap_or_else(|| panic!("{:#?}", s.decisions));
    assert!(d
        .decision
        .contains("That would be cheaper than spare batteries."));
    assert_eq!(d.agreed_by, ["PERSON1", "PERSON2"]);
    assert_eq!(d.evidence_seqs, [2, 3]);
    // The proposal is the decision, not also an action.
    assert!(s
        .pending_actions
        .iter()
        .all(|a| !a.action.contains("charging cradle")));
}

#[test]
fn continuers_objections_and_later_turns_accept_nothing() {
    for (reply, by) in [
        ("Hm. The cradle is too big.", "PERSON2"),
        ("Yeah, but the cradle costs too much.", "PERSON2"),
        ("Yeah.", "PERSON1"),
    ] {
        let turns = [
            said(1, "PERSON1", "We should put a charging cradle in the box."),
            said(2, by, reply),
        ];
        let s = summary(&turns);
        assert!(s.decisions.is_empty(), "{reply:?}: {:#?}", s.decisions);
    }
    // Assent two turns later answers something else.
    let turns = [
        said(1, "PERSON1", "We should put a charging cradle in the box."),
        said(2, "PERSON3", "The case is rubber {vocalsound} ."),
        said(3, "PERSON2", "Yeah, sure."),
    ];
    assert!(summary(&turns).decisions.is_empty());
}

#[test]
fn a_short_decision_about_that_takes_the_sentence_it_points_at() {
    let turns = [said(
        1,
        "PERSON10",
        "If it is only a matter of downloading the data and polishing it, no manual work. \
         Yes, let's include that.",
    )];
    let s = summary(&turns);
    assert_eq!(
        s.decisions
            .iter()
            .map(|d| d.decision.as_str())
            .collect::<Vec<_>>(),
        [
            "If it is only a matter of downloading the data and polishing it, no manual work. \
             Yes, let's include that."
        ]
    );
}

#[test]
fn decisions_that_say_nothing_are_not_items() {
    let turns = [said(
        1,
        "PERSON3",
        "So this is what we decided up to now for the last 40 minutes. \
         So probably we decided, as I mentioned, the sure of, okay.",
    )];
    assert!(summary(&turns).decisions.is_empty());
}

/// Words for distinct vague commitments.
const NOUNS: [&str; 13] = [
    "screen", "speaker", "logo", "strap", "light", "switch", "cable", "label", "manual", "box",
    "pricing", "survey", "market",
];

#[test]
fn a_long_meeting_shows_its_most_salient_items_and_counts_the_rest() {
    // 30 commitments of little salience, then a decision and two named
    // assignments:
    // about 5,000 words, so at most 13 items.
    let mut turns = Vec::new();
    let filler =
        "the the the casing design for the remote control is something we talk about a lot \
                  and there is a lot more to say about the buttons and the colours of it ";
    for i in 0..30u64 {
        turns.push(said(
            i * 2 + 1,
            "PERSON1",
            &format!("{filler}{filler}{filler}{filler}{filler}"),
        ));
        let w: Vec<String> = (0..5).map(|k| format!("{}{i}", NOUNS[k])).collect();
        turns.push(said(
            i * 2 + 2,
            "PERSON2",
            &format!("So we need to, uh, check the {} by Friday.", w.join(" ")),
        ));
    }
    turns.push(said(
        61,
        "PERSON3",
        "So we decided to use one large round button for the volume.",
    ));
    turns.push(said(
        62,
        "PERSON1",
        "PERSON2 will draw the rubber casing by Friday.",
    ));
    turns.push(said(
        63,
        "PERSON2",
        "I will send the chip prices to everyone.",
    ));
    let s = summary(&turns);
    let shown = s.decisions.len() + s.pending_actions.len();
    assert!(shown <= rules::items_shown(5_500), "{shown} shown");
    assert!(s
        .decisions
        .iter()
        .any(|d| d.decision.contains("round button")));
    assert!(s
        .pending_actions
        .iter()
        .any(|a| a.owner == "PERSON2" && a.action.contains("casing")));
    assert!(s
        .pending_actions
        .iter()
        .any(|a| a.action.contains("chip prices")));
    assert!(
        s.truncated
            .contains("less salient decisions and pending_actions not shown"),
        "{}",
        s.truncated
    );
}

#[test]
fn in_a_long_meeting_an_assented_item_of_two_words_stays_out() {
    // QMSum Academic: "I thought we could point that out ." assented to,
    // "Climb , rob ." addressed to a name; about 5,000 words around them.
    let filler = "the casing design for the remote control is something we talk about \
                  a lot and there is a lot more to say about the buttons and colours ";
    let mut turns = Vec::new();
    for i in 0..60u64 {
        turns.push(said(i + 1, "Grad A", &format!("{filler}{filler}{filler}")));
    }
    turns.push(said(61, "Grad B", "I thought we could point that out ."));
    turns.push(said(62, "Grad A", "Yeah ."));
    turns.push(said(63, "Grad B", "Climb , rob ."));
    turns.push(said(
        64,
        "Grad A",
        "I will send the chip prices and the battery figures to everyone.",
    ));
    let s = summary(&turns);
    assert!(s.decisions.iter().all(|d| !d.decision.contains("point")));
    assert!(s.pending_actions.iter().all(|a| !a.action.contains("rob")));
    assert!(s
        .pending_actions
        .iter()
        .any(|a| a.action.contains("chip prices")));
}

#[test]
fn a_meeting_reads_as_a_meeting_not_as_a_user_asking() {
    // The opening of a product-design meeting (the held-out report's
    // shape), with QMSum's markers.
    let turns = [
        said(1, "Project Manager", "So uh good morning. {vocalsound}"),
        said(
            2,
            "Project Manager",
            "First I will introduce myself. Now first I'll tell you a little bit about the setting. \
             I'll start with the presentation kick off.",
        ),
        said(3, "Marketing", "Okay. {disfmarker} Sounds good."),
        said(
            4,
            "Industrial Designer",
            "I will send the drawings of the remote control casing to the team by Friday.",
        ),
        said(
            5,
            "Marketing",
            "And we decided that the remote control gets a rubber case {vocalsound} in two colours.",
        ),
    ];
    let s = summary(&turns);
    assert!(!s.prose.contains("The user asked"), "{}", s.prose);
    assert!(s.prose.starts_with("Meeting of "), "{}", s.prose);
    assert!(s.prose.contains("Industrial Designer"), "{}", s.prose);
    for a in &s.pending_actions {
        assert!(
            !a.action.contains("introduce myself")
                && !a.action.contains("tell you a little")
                && !a.action.contains("presentation kick off"),
            "agenda talk is no action: {a:?}"
        );
    }
    assert!(
        s.pending_actions
            .iter()
            .any(|a| a.owner == "Industrial Designer" && a.action.contains("drawings")),
        "{:#?}",
        s.pending_actions
    );
    assert!(
        s.prose
            .contains("Most pressing action (Industrial Designer)"),
        "{}",
        s.prose
    );
    for d in &s.decisions {
        assert!(!d.decision.contains('{'), "marker in {d:?}");
    }
}

#[test]
fn a_chat_between_two_people_names_both_and_an_agent_session_keeps_the_user() {
    let turns = [
        said(
            1,
            "Emi",
            "I will book the hiking cabin for the weekend of the 14th.",
        ),
        said(2, "Elise", "Great, I will bring the maps and the stove."),
    ];
    let s = summary(&turns);
    assert!(
        s.prose.starts_with("Conversation between ")
            && s.prose.contains("Emi")
            && s.prose.contains("Elise"),
        "{}",
        s.prose
    );
    let mut agent = turns.to_vec();
    agent[1].role = Role::Assistant;
    let s = summary(&agent);
    assert!(s.prose.starts_with("The user asked"), "{}", s.prose);
}

#[test]
fn an_action_for_you_cites_the_turn_of_the_person_addressed() {
    let turns = [
        said(
            1,
            "raj",
            "Welcome, today we review the quarterly audit preparation.",
        ),
        said(2, "ana", "The auditors asked for the ledger exports."),
        said(
            3,
            "raj",
            "You should send the ledger exports to the auditors by Friday.",
        ),
    ];
    let s = summary(&turns);
    let a = s
        .pending_actions
        .iter()
        .find(|a| a.action.contains("ledger exports"))
        .unwrap_or_else(|| panic!("{:#?}", s.pending_actions));
    assert_eq!(a.owner, "ana");
    assert_eq!(a.evidence_seqs, [3, 2], "the origin first, then ana's turn");
    let cited: BTreeMap<u64, Turn> = turns.iter().map(|t| (t.seq, t.clone())).collect();
    assert_eq!(crate::summarize::validate::validate(&s, &cited, 3), Ok(()));
}
