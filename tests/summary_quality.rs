//! Summary quality, measured. Summarizes each hand-labelled conversation in
//! `tests/fixtures/summaries/` (format in the README there) with the
//! deterministic summarizer and measures, over all fixtures:
//! - precision and recall of decisions, pending actions and open questions
//!   against the expected items;
//! - entity faithfulness: the share of identifiers, amounts, dates, emails
//!   and URLs in the summary's items that appear verbatim in the turns the
//!   item cites (must be 100%, and no item may cite a turn that does not
//!   exist);
//! - the share of expected key facts kept verbatim in some key fact.
//!
//! The floors are the figures the engine reached, rounded down to 0.05; a
//! better engine raises them. `cargo test --test summary_quality --
//! --nocapture` prints the table and every missed or extra item.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use mnemo::model::{Encoding, NewTurn, Role, ToolCall, ToolCallStatus, Turn};
use mnemo::model::{SessionSummary, Trigger};
use mnemo::summarize::{summarize, SummaryContext};
use serde::Deserialize;

/// (precision, recall) floors in `Category::ALL` order: what the engine
/// reached, rounded down to 0.05. These fixtures were written before the
/// labelling guideline (docs/summaries.md) and the dialogue-act gate: they
/// expect an agent's narrated tool steps ("I'll refresh the credentials
/// and retry", then the call) and a system notice as items, which the
/// guideline does not count, so the gate's recall here is lower by those
/// (measured before the gate 0.75 / 0.83, 0.87 / 0.90, 0.73 / 0.80).
const FLOORS: [(f64, f64); 3] = [
    (0.70, 0.75), // decisions: measured 0.74 / 0.78
    (0.85, 0.85), // pending actions: measured 0.90 / 0.86
    (0.70, 0.70), // open questions: measured 0.78 / 0.70
];

/// Share of `key_facts_verbatim` strings found in some key fact.
const KEY_FACTS_FLOOR: f64 = 1.0;

const FIXTURE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/summaries");

// ---------------------------------------------------------------------------
// Fixture format

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fixture {
    name: String,
    #[allow(dead_code)] // For the reader of the JSON file.
    description: String,
    start_time: String,
    turns: Vec<FixtureTurn>,
    expected: Expected,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureTurn {
    role: String,
    speaker: String,
    content: String,
    offset_seconds: i64,
    #[serde(default)]
    tool_call: Option<FixtureToolCall>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureToolCall {
    tool_name: String,
    arguments_json: String,
    #[serde(default)]
    result: String,
    status: String,
    #[serde(default)]
    error_details: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Expected {
    #[serde(default)]
    decisions: Vec<ExpectedDecision>,
    #[serde(default)]
    pending_actions: Vec<ExpectedAction>,
    #[serde(default)]
    open_questions: Vec<ExpectedQuestion>,
    #[serde(default)]
    key_facts_verbatim: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedDecision {
    seq: u64,
    contains: Option<String>,
    #[allow(dead_code)] // For the reader of the JSON file.
    note: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedAction {
    seq: u64,
    owner: Option<String>,
    status: Option<String>,
    deadline: Option<String>,
    #[allow(dead_code)] // For the reader of the JSON file.
    note: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectedQuestion {
    seq: u64,
    #[allow(dead_code)] // For the reader of the JSON file.
    note: Option<String>,
}

fn load_fixtures() -> Vec<Fixture> {
    let mut paths: Vec<_> = std::fs::read_dir(FIXTURE_DIR)
        .expect("fixture directory is readable")
        .map(|e| e.expect("fixture directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths.iter().map(|p| load_fixture(p)).collect()
}

fn load_fixture(path: &Path) -> Fixture {
    let text = std::fs::read_to_string(path).expect("fixture is readable");
    let f: Fixture = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not a valid fixture: {e}", path.display()));
    check_fixture(&f);
    f
}

/// Rejects a fixture whose expectations cannot be right, so a typo in a
/// label shows up as a broken fixture rather than as a quality figure.
fn check_fixture(f: &Fixture) {
    let n = f.turns.len() as u64;
    let in_range = |seq: u64, what: &str| {
        assert!(
            (1..=n).contains(&seq),
            "{}: {what} seq {seq} is not a turn (1..={n})",
            f.name
        );
    };
    for d in &f.expected.decisions {
        in_range(d.seq, "decision");
        if let Some(c) = &d.contains {
            let content = f.turns[d.seq as usize - 1].content.to_lowercase();
            assert!(
                content.contains(&c.to_lowercase()),
                "{}: decision seq {} does not say {c:?}",
                f.name,
                d.seq
            );
        }
    }
    for a in &f.expected.pending_actions {
        in_range(a.seq, "pending action");
        if let Some(s) = &a.status {
            assert!(
                ["PENDING", "IN_PROGRESS", "DONE"].contains(&s.as_str()),
                "{}: action seq {}: unknown status {s:?}",
                f.name,
                a.seq
            );
        }
        if let Some(d) = &a.deadline {
            assert!(
                parse_date(d).is_some(),
                "{}: action seq {}: deadline {d:?} is not YYYY-MM-DD",
                f.name,
                a.seq
            );
        }
    }
    for q in &f.expected.open_questions {
        in_range(q.seq, "open question");
    }
    for fact in &f.expected.key_facts_verbatim {
        assert!(
            (1..=n).any(|seq| turn_text(&f.turns, seq).contains(fact.as_str())),
            "{}: key fact {fact:?} is in no turn",
            f.name
        );
    }
}

/// Everything a turn says: its speaker, content and tool-call text.
fn turn_text(turns: &[FixtureTurn], seq: u64) -> String {
    let t = &turns[seq as usize - 1];
    let mut s = format!("{}\n{}", t.speaker, t.content);
    if let Some(c) = &t.tool_call {
        for part in [&c.tool_name, &c.arguments_json, &c.result, &c.error_details] {
            s.push('\n');
            s.push_str(part);
        }
    }
    s
}

// ---------------------------------------------------------------------------
// Fixture -> turns

fn to_turns(f: &Fixture) -> Vec<Turn> {
    let start = parse_rfc3339_utc(&f.start_time)
        .unwrap_or_else(|| panic!("{}: start_time is not YYYY-MM-DDTHH:MM:SSZ", f.name));
    f.turns
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let new = NewTurn {
                role: parse_role(&t.role)
                    .unwrap_or_else(|| panic!("{}: role {:?}", f.name, t.role)),
                speaker: t.speaker.clone(),
                content: t.content.clone(),
                client_time: None,
                tool_call: t.tool_call.as_ref().map(|c| ToolCall {
                    tool_name: c.tool_name.clone(),
                    arguments_json: c.arguments_json.clone(),
                    result: c.result.clone(),
                    status: parse_status(&c.status)
                        .unwrap_or_else(|| panic!("{}: tool status {:?}", f.name, c.status)),
                    error_details: c.error_details.clone(),
                }),
                metadata: t.metadata.clone(),
            };
            let token_count = mnemo::tokens::count_turn(Encoding::Cl100kBase, &new);
            let time = (start + t.offset_seconds) * 1_000_000_000;
            Turn {
                seq: i as u64 + 1,
                role: new.role,
                speaker: new.speaker,
                content: new.content,
                client_time: Some(time),
                server_time: time,
                tool_call: new.tool_call,
                metadata: new.metadata,
                token_count,
            }
        })
        .collect()
}

fn parse_role(s: &str) -> Option<Role> {
    Some(match s {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" => Role::System,
        "tool" => Role::Tool,
        _ => return None,
    })
}

fn parse_status(s: &str) -> Option<ToolCallStatus> {
    Some(match s {
        "success" => ToolCallStatus::Success,
        "failure" => ToolCallStatus::Failure,
        "timeout" => ToolCallStatus::Timeout,
        "pending" => ToolCallStatus::Pending,
        "unknown" => ToolCallStatus::Unknown,
        _ => return None,
    })
}

/// Seconds since the Unix epoch of `YYYY-MM-DDTHH:MM:SSZ`.
fn parse_rfc3339_utc(s: &str) -> Option<i64> {
    let (date, time) = s.strip_suffix('Z')?.split_once('T')?;
    let days = parse_date(date)?;
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, sec] = hms[..] else { return None };
    if h > 23 || m > 59 || sec > 59 {
        return None;
    }
    Some(days * 86_400 + h * 3600 + m * 60 + sec)
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date (proleptic Gregorian).
fn parse_date(s: &str) -> Option<i64> {
    let parts: Vec<&str> = s.split('-').collect();
    let [y, m, d] = parts[..] else { return None };
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, m, d): (i64, i64, i64) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

// ---------------------------------------------------------------------------
// Matching produced items to expected items

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Category {
    Decisions,
    PendingActions,
    OpenQuestions,
}

impl Category {
    const ALL: [Category; 3] = [
        Category::Decisions,
        Category::PendingActions,
        Category::OpenQuestions,
    ];

    fn name(self) -> &'static str {
        match self {
            Category::Decisions => "decisions",
            Category::PendingActions => "pending actions",
            Category::OpenQuestions => "open questions",
        }
    }
}

#[derive(Default, Clone, Copy)]
struct Tally {
    expected: usize,
    produced: usize,
    matched: usize,
}

impl Tally {
    fn add(&mut self, o: Tally) {
        self.expected += o.expected;
        self.produced += o.produced;
        self.matched += o.matched;
    }

    /// Matched over produced; 1 when nothing was produced.
    fn precision(self) -> f64 {
        ratio(self.matched, self.produced)
    }

    /// Matched over expected; 1 when nothing was expected.
    fn recall(self) -> f64 {
        ratio(self.matched, self.expected)
    }
}

fn ratio(num: usize, den: usize) -> f64 {
    if den == 0 {
        1.0
    } else {
        num as f64 / den as f64
    }
}

/// A maximum one-to-one matching (Kuhn's augmenting paths) between expected
/// items and the produced items that `fits` them. Returns, per expected
/// item, the produced item it is matched to.
fn max_matching(
    n_expected: usize,
    n_produced: usize,
    fits: impl Fn(usize, usize) -> bool,
) -> Vec<Option<usize>> {
    fn augment(
        e: usize,
        adj: &[Vec<usize>],
        seen: &mut [bool],
        owner_of: &mut [Option<usize>],
    ) -> bool {
        for &p in &adj[e] {
            if !seen[p] {
                seen[p] = true;
                if owner_of[p].is_none_or(|other| augment(other, adj, seen, owner_of)) {
                    owner_of[p] = Some(e);
                    return true;
                }
            }
        }
        false
    }
    let adj: Vec<Vec<usize>> = (0..n_expected)
        .map(|e| (0..n_produced).filter(|&p| fits(e, p)).collect())
        .collect();
    let mut owner_of = vec![None; n_produced];
    for e in 0..n_expected {
        augment(e, &adj, &mut vec![false; n_produced], &mut owner_of);
    }
    let mut out = vec![None; n_expected];
    for (p, e) in owner_of.iter().enumerate() {
        if let Some(e) = e {
            out[*e] = Some(p);
        }
    }
    out
}

/// One category of one fixture, reduced to what matching needs.
struct Scored {
    tally: Tally,
    /// Missed expected items and unmatched produced items, explained.
    details: Vec<String>,
}

/// One category of one fixture, ready to match: the expected items
/// (evidence seq, description), the produced items (evidence seqs,
/// description), and why a produced item that cites an expected item's seq
/// still does not fit it (empty when it fits).
struct Items<'a> {
    expected: Vec<(u64, String)>,
    produced: Vec<(&'a [u64], String)>,
    mismatches: Box<dyn Fn(usize, usize) -> Vec<String> + 'a>,
}

fn score(cat: Category, items: Items<'_>) -> Scored {
    let fits = |e: usize, p: usize| {
        items.produced[p].0.contains(&items.expected[e].0) && (items.mismatches)(e, p).is_empty()
    };
    let matching = max_matching(items.expected.len(), items.produced.len(), fits);
    let mut used = vec![false; items.produced.len()];
    let mut details = Vec::new();
    for (e, m) in matching.iter().enumerate() {
        match m {
            Some(p) => used[*p] = true,
            None => {
                let (seq, what) = &items.expected[e];
                let mut line = format!("missed {} at seq {seq}: {what}", singular(cat));
                let citing: Vec<usize> = (0..items.produced.len())
                    .filter(|&p| items.produced[p].0.contains(seq))
                    .collect();
                for p in citing {
                    let why = (items.mismatches)(e, p);
                    if why.is_empty() {
                        let _ = write!(
                            line,
                            "; {:?} fits but is matched elsewhere",
                            items.produced[p].1
                        );
                    } else {
                        let _ = write!(
                            line,
                            "; {:?} cites it but {}",
                            items.produced[p].1,
                            why.join(", ")
                        );
                    }
                }
                details.push(line);
            }
        }
    }
    for (p, was_used) in used.iter().enumerate() {
        if !was_used {
            let (seqs, text) = &items.produced[p];
            details.push(format!("extra {} {seqs:?}: {text}", singular(cat)));
        }
    }
    Scored {
        tally: Tally {
            expected: items.expected.len(),
            produced: items.produced.len(),
            matched: matching.iter().flatten().count(),
        },
        details,
    }
}

fn singular(cat: Category) -> &'static str {
    match cat {
        Category::Decisions => "decision",
        Category::PendingActions => "action",
        Category::OpenQuestions => "question",
    }
}

fn score_decisions(exp: &[ExpectedDecision], s: &SessionSummary) -> Scored {
    score(
        Category::Decisions,
        Items {
            expected: exp
                .iter()
                .map(|d| {
                    (
                        d.seq,
                        format!("contains {:?}", d.contains.as_deref().unwrap_or("")),
                    )
                })
                .collect(),
            produced: s
                .decisions
                .iter()
                .map(|d| (d.evidence_seqs.as_slice(), d.decision.clone()))
                .collect(),
            mismatches: Box::new(move |e, p| {
                let mut why = Vec::new();
                if let Some(c) = &exp[e].contains {
                    if !s.decisions[p]
                        .decision
                        .to_lowercase()
                        .contains(&c.to_lowercase())
                    {
                        why.push(format!("does not say {c:?}"));
                    }
                }
                why
            }),
        },
    )
}

fn score_actions(exp: &[ExpectedAction], s: &SessionSummary) -> Scored {
    score(
        Category::PendingActions,
        Items {
            expected: exp
                .iter()
                .map(|a| {
                    let mut what = String::new();
                    for (k, v) in [
                        ("owner", &a.owner),
                        ("status", &a.status),
                        ("deadline", &a.deadline),
                    ] {
                        if let Some(v) = v {
                            let _ = write!(what, "{k}={v} ");
                        }
                    }
                    (a.seq, what.trim_end().to_string())
                })
                .collect(),
            produced: s
                .pending_actions
                .iter()
                .map(|a| {
                    let text = format!(
                        "{} (owner={} status={} deadline={})",
                        a.action,
                        a.owner,
                        enum_name(&a.status),
                        a.deadline
                    );
                    (a.evidence_seqs.as_slice(), text)
                })
                .collect(),
            mismatches: Box::new(move |e, p| {
                let (want, got) = (&exp[e], &s.pending_actions[p]);
                let mut why = Vec::new();
                if let Some(o) = &want.owner {
                    if !o.trim().eq_ignore_ascii_case(got.owner.trim()) {
                        why.push(format!("owner is {:?}, not {o:?}", got.owner));
                    }
                }
                if let Some(st) = &want.status {
                    let got_status = enum_name(&got.status);
                    if *st != got_status {
                        why.push(format!("status is {got_status}, not {st}"));
                    }
                }
                if let Some(d) = &want.deadline {
                    if *d != got.deadline {
                        why.push(format!("deadline is {:?}, not {d:?}", got.deadline));
                    }
                }
                why
            }),
        },
    )
}

fn score_questions(exp: &[ExpectedQuestion], s: &SessionSummary) -> Scored {
    score(
        Category::OpenQuestions,
        Items {
            expected: exp.iter().map(|q| (q.seq, String::new())).collect(),
            produced: s
                .open_questions
                .iter()
                .map(|q| (q.evidence_seqs.as_slice(), q.question.clone()))
                .collect(),
            mismatches: Box::new(|_, _| Vec::new()),
        },
    )
}

/// The wire name of an enum (`PENDING`, `DONE`...), as serde writes it.
fn enum_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        other => format!("{other:?}"),
    }
}

// ---------------------------------------------------------------------------
// Entity faithfulness

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const CURRENCY_CODES: [&str; 6] = ["EUR", "USD", "GBP", "CHF", "SEK", "JPY"];

/// The entities a reader would copy from `text`: identifiers (a token with
/// both letters and digits, or `#` and digits), amounts (`$49.99`,
/// `EUR 268`), dates (`2024-03-15`, `April 16`), emails and URLs.
fn entities(text: &str) -> Vec<String> {
    let tokens: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || "\"'`(){}[]<>;|".contains(c))
        .map(|t| t.trim_matches(|c: char| ",.:!?*…".contains(c)))
        .filter(|t| !t.is_empty())
        .collect();
    let mut out = Vec::new();
    for (i, &t) in tokens.iter().enumerate() {
        if is_url(t) || is_email(t) || is_amount(t) || is_iso_date(t) || is_identifier(t) {
            out.push(t.to_string());
        }
        if let Some(&next) = tokens.get(i + 1) {
            let pair = format!("{t} {next}");
            let day = next.len() <= 2 && next.chars().all(|c| c.is_ascii_digit());
            let number = next.starts_with(|c: char| c.is_ascii_digit());
            if ((MONTHS.contains(&t) && day) || (CURRENCY_CODES.contains(&t) && number))
                && text.contains(&pair)
            {
                out.push(pair);
            }
        }
    }
    out
}

fn is_url(t: &str) -> bool {
    t.contains("://")
}

fn is_email(t: &str) -> bool {
    t.split_once('@')
        .is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.'))
}

fn is_amount(t: &str) -> bool {
    let mut cs = t.chars();
    matches!(cs.next(), Some('$' | '€' | '£' | '¥'))
        && cs.next().is_some_and(|c| c.is_ascii_digit())
}

/// `dddd-dd-dd` at the start, valid or not: an invented date is still a date.
fn is_iso_date(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() >= 10
        && b[..10].iter().enumerate().all(|(i, c)| {
            if i == 4 || i == 7 {
                *c == b'-'
            } else {
                c.is_ascii_digit()
            }
        })
}

fn is_identifier(t: &str) -> bool {
    let digit = t.chars().any(|c| c.is_ascii_digit());
    let letter = t.chars().any(|c| c.is_alphabetic());
    let hash_number =
        t.len() > 1 && t.starts_with('#') && t[1..].chars().all(|c| c.is_ascii_digit());
    (digit && letter) || hash_number
}

/// Where an item's text must come from.
enum Cites {
    /// These turns.
    Seqs(Vec<u64>),
    /// Any turn (fields that cite nothing: the topic, the prose).
    Session,
}

/// Every text field of the summary with the turns it may quote. Speakers,
/// owners, statuses and deadlines are left out: they are names and resolved
/// values, not quotations.
fn cited_texts(s: &SessionSummary) -> Vec<(String, String, Cites)> {
    let mut out = Vec::new();
    let mut add = |label: String, text: &str, cites: Cites| {
        if !text.is_empty() {
            out.push((label, text.to_string(), cites));
        }
    };
    let intent_cites = match s.user_intent_seq {
        0 => Cites::Session,
        seq => Cites::Seqs(vec![seq]),
    };
    add("user_intent".into(), &s.user_intent, intent_cites);
    add("topic".into(), &s.topic, Cites::Session);
    add("prose".into(), &s.prose, Cites::Session);
    for d in &s.decisions {
        add(
            "decision".into(),
            &d.decision,
            Cites::Seqs(d.evidence_seqs.clone()),
        );
        add(
            "decision rationale".into(),
            &d.rationale,
            Cites::Seqs(d.evidence_seqs.clone()),
        );
    }
    for a in &s.pending_actions {
        add(
            "action".into(),
            &a.action,
            Cites::Seqs(a.evidence_seqs.clone()),
        );
    }
    for q in &s.open_questions {
        add(
            "open question".into(),
            &q.question,
            Cites::Seqs(q.evidence_seqs.clone()),
        );
    }
    for f in &s.key_facts {
        add(
            "key fact".into(),
            &f.fact,
            Cites::Seqs(f.evidence_seqs.clone()),
        );
    }
    for t in &s.tool_calls {
        for (field, text) in [
            ("tool_name", &t.tool_name),
            ("arguments_json", &t.arguments_json),
            ("result_summary", &t.result_summary),
            ("error_details", &t.error_details),
        ] {
            add(format!("tool call {field}"), text, Cites::Seqs(vec![t.seq]));
        }
    }
    for a in &s.artifacts {
        add(
            "artifact id".into(),
            &a.artifact_id,
            Cites::Seqs(vec![a.seq]),
        );
        add(
            "artifact summary".into(),
            &a.summary,
            Cites::Seqs(vec![a.seq]),
        );
    }
    for a in &s.errors_and_anomalies {
        add("anomaly".into(), &a.description, Cites::Seqs(vec![a.seq]));
    }
    for c in &s.unresolved_conflicts {
        add(
            "conflict".into(),
            &c.description,
            Cites::Seqs(c.conflicting_seqs.clone()),
        );
    }
    for t in &s.topics {
        let range: Vec<u64> = (t.first_seq..=t.last_seq).collect();
        add("topic segment".into(), &t.topic, Cites::Seqs(range.clone()));
        let points = if t.evidence_seqs.is_empty() {
            range
        } else {
            t.evidence_seqs.clone()
        };
        for k in &t.key_points {
            add("topic key point".into(), k, Cites::Seqs(points.clone()));
        }
    }
    out
}

#[derive(Default)]
struct Faithfulness {
    entities: usize,
    verbatim: usize,
    dangling_citations: usize,
    details: Vec<String>,
}

fn faithfulness(f: &Fixture, s: &SessionSummary) -> Faithfulness {
    let n = f.turns.len() as u64;
    let session: Vec<u64> = (1..=n).collect();
    let mut out = Faithfulness::default();
    for (label, text, cites) in cited_texts(s) {
        let seqs = match &cites {
            Cites::Seqs(seqs) => seqs,
            Cites::Session => &session,
        };
        for &seq in seqs {
            if !(1..=n).contains(&seq) {
                out.dangling_citations += 1;
                out.details
                    .push(format!("{label} cites seq {seq}, which does not exist"));
            }
        }
        let source: String = seqs
            .iter()
            .filter(|seq| (1..=n).contains(*seq))
            .map(|&seq| turn_text(&f.turns, seq))
            .collect::<Vec<_>>()
            .join("\n");
        for entity in entities(&text) {
            out.entities += 1;
            if source.contains(&entity) {
                out.verbatim += 1;
            } else {
                out.details.push(format!(
                    "{label} {seqs:?}: {entity:?} is not in the cited turns ({text:?})"
                ));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The test

struct FixtureResult {
    name: String,
    turns: usize,
    tallies: [Tally; 3],
    faith: Faithfulness,
    facts_expected: usize,
    facts_kept: usize,
    details: Vec<String>,
}

fn evaluate(f: &Fixture) -> FixtureResult {
    let turns = to_turns(f);
    let last_time = turns.last().map_or(0, |t| t.server_time);
    let ctx = SummaryContext {
        namespace: String::new(),
        context_limit_tokens: 128_000,
        bundle_tokens: turns.iter().map(|t| u64::from(t.token_count)).sum(),
        trigger: Trigger::Requested,
        version: 1,
        now: last_time,
        high_risk: false,
        wait_free: false,
    };
    let s = summarize(&turns, &ctx);
    let scored = [
        score_decisions(&f.expected.decisions, &s),
        score_actions(&f.expected.pending_actions, &s),
        score_questions(&f.expected.open_questions, &s),
    ];
    let faith = faithfulness(f, &s);
    let mut details: Vec<String> = scored.iter().flat_map(|x| x.details.clone()).collect();
    let mut facts_kept = 0;
    for fact in &f.expected.key_facts_verbatim {
        if s.key_facts.iter().any(|k| k.fact.contains(fact.as_str())) {
            facts_kept += 1;
        } else {
            details.push(format!("key fact {fact:?} is in no key fact"));
        }
    }
    details.extend(faith.details.iter().cloned());
    FixtureResult {
        name: f.name.clone(),
        turns: turns.len(),
        tallies: [scored[0].tally, scored[1].tally, scored[2].tally],
        faith,
        facts_expected: f.expected.key_facts_verbatim.len(),
        facts_kept,
        details,
    }
}

fn cell(t: Tally) -> String {
    format!("{}/{}/{}", t.matched, t.expected, t.produced)
}

#[test]
fn summary_quality() {
    let fixtures = load_fixtures();
    assert!(
        fixtures.len() >= 12,
        "expected at least 12 fixtures in {FIXTURE_DIR}"
    );
    let results: Vec<FixtureResult> = fixtures.iter().map(evaluate).collect();

    let mut totals = [Tally::default(); 3];
    let (mut entities, mut verbatim, mut dangling) = (0, 0, 0);
    let (mut facts_expected, mut facts_kept) = (0, 0);
    for r in &results {
        for (total, t) in totals.iter_mut().zip(r.tallies) {
            total.add(t);
        }
        entities += r.faith.entities;
        verbatim += r.faith.verbatim;
        dangling += r.faith.dangling_citations;
        facts_expected += r.facts_expected;
        facts_kept += r.facts_kept;
    }
    let turns: usize = results.iter().map(|r| r.turns).sum();

    eprintln!(
        "\nsummary quality over {} fixtures ({turns} turns)",
        results.len()
    );
    eprintln!(
        "{:<16} {:>8} {:>8} {:>7} {:>9} {:>7}   floor P/R",
        "category", "expected", "produced", "matched", "precision", "recall"
    );
    for ((cat, t), (floor_p, floor_r)) in Category::ALL.iter().zip(totals).zip(FLOORS) {
        eprintln!(
            "{:<16} {:>8} {:>8} {:>7} {:>9.2} {:>7.2}   {:.2}/{:.2}",
            cat.name(),
            t.expected,
            t.produced,
            t.matched,
            t.precision(),
            t.recall(),
            floor_p,
            floor_r
        );
    }
    let entity_share = ratio(verbatim, entities);
    let facts_share = ratio(facts_kept, facts_expected);
    eprintln!(
        "entities verbatim in cited turns: {verbatim}/{entities} = {:.1}% (must be 100%); dangling citations: {dangling}",
        entity_share * 100.0
    );
    eprintln!(
        "expected key facts kept verbatim: {facts_kept}/{facts_expected} = {:.1}% (floor {:.0}%)",
        facts_share * 100.0,
        KEY_FACTS_FLOOR * 100.0
    );

    eprintln!(
        "\n{:<28} {:>5}  {:>9} {:>9} {:>9}  {:>9}  {:>6}   (matched/expected/produced)",
        "fixture", "turns", "decisions", "actions", "questions", "entities", "facts"
    );
    for r in &results {
        eprintln!(
            "{:<28} {:>5}  {:>9} {:>9} {:>9}  {:>9}  {:>6}",
            r.name,
            r.turns,
            cell(r.tallies[0]),
            cell(r.tallies[1]),
            cell(r.tallies[2]),
            format!("{}/{}", r.faith.verbatim, r.faith.entities),
            format!("{}/{}", r.facts_kept, r.facts_expected),
        );
    }
    for r in results.iter().filter(|r| !r.details.is_empty()) {
        eprintln!("\n{}:", r.name);
        for d in &r.details {
            eprintln!("  {d}");
        }
    }

    let mut failures = Vec::new();
    if verbatim != entities || dangling != 0 {
        failures.push(format!(
            "entity faithfulness {verbatim}/{entities} with {dangling} dangling citations; must be 100% and 0"
        ));
    }
    for ((cat, t), (floor_p, floor_r)) in Category::ALL.iter().zip(totals).zip(FLOORS) {
        if t.precision() < floor_p {
            failures.push(format!(
                "{} precision {:.3} < floor {:.2}",
                cat.name(),
                t.precision(),
                floor_p
            ));
        }
        if t.recall() < floor_r {
            failures.push(format!(
                "{} recall {:.3} < floor {:.2}",
                cat.name(),
                t.recall(),
                floor_r
            ));
        }
    }
    if facts_share < KEY_FACTS_FLOOR {
        failures.push(format!(
            "key facts kept {facts_share:.3} < floor {KEY_FACTS_FLOOR:.2}"
        ));
    }
    assert!(
        failures.is_empty(),
        "summary quality below its floors (details above):\n{}",
        failures.join("\n")
    );
}

#[test]
fn rfc3339_and_dates_parse() {
    assert_eq!(parse_rfc3339_utc("1970-01-01T00:00:00Z"), Some(0));
    assert_eq!(
        parse_rfc3339_utc("2024-03-12T14:05:00Z"),
        Some(1_710_252_300)
    );
    assert_eq!(parse_rfc3339_utc("2024-03-12 14:05:00"), None);
    assert_eq!(parse_date("2000-03-01"), Some(11_017));
    assert_eq!(parse_date("2024-13-01"), None);
}

#[test]
fn entity_extraction() {
    let got = entities(
        "Refund re_88231 of $49.99 for ORD-9921 (PR #4821) on 2024-03-10, by April 16, \
         EUR 268, mail maria@example.com, see https://x.io/a. Thanks, see you at 14:40.",
    );
    assert_eq!(
        got,
        [
            "re_88231",
            "$49.99",
            "ORD-9921",
            "#4821",
            "2024-03-10",
            "April 16",
            "EUR 268",
            "maria@example.com",
            "https://x.io/a"
        ]
    );
}

#[test]
fn matching_is_maximum() {
    // Expected 0 fits produced 0 and 1; expected 1 fits only produced 0. A
    // greedy pass would match 0-0 and leave 1 unmatched.
    let m = max_matching(2, 2, |e, p| (e == 0) || p == 0);
    assert_eq!(m, [Some(1), Some(0)]);
}
