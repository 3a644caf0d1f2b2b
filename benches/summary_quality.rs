//! How the rule-based summarizer reads real meetings: each meeting of the
//! set (default the committed ELITR dev meetings,
//! `tests/fixtures/meetings_elitr/dev.json`; `MNEMO_MEETING_SET` for
//! others, comma separated, each `name=path` or a bare path: e.g. ELITR
//! dev, ELITR test and QMSum converted by `scripts/`) is summarized from scratch, and its decisions
//! and pending actions are scored against the gold items of the human
//! minutes:
//!
//! - recall: gold items whose content words are at least half covered by
//!   one decision or action (content-word overlap ≥ 0.5);
//! - items produced, and per 1,000 words of transcript;
//! - junk: items that are greetings, thanks, backchannels, fillers,
//!   marker-only, or have fewer than three content words;
//! - owners that are not participants (neither a speaker of the meeting nor
//!   a person named in the item's cited turns), "unassigned" aside;
//! - items per hour of meeting, the hour estimated from the words spoken
//!   at 150 words a minute (9,000 words an hour: the transcripts carry no
//!   times);
//! - unfaithful items: an item whose words (markers aside) do not appear,
//!   in order, in one of its cited turns;
//! - fold time;
//! - span recall, for sets whose gold items carry the turns that hold their
//!   evidence (`gold_spans`, QMSum): gold items whose span holds a turn
//!   cited by a decision or action (abstractive answers rarely share half
//!   their words with any sentence spoken).
//!
//! Each set is one corpus: its meetings are listed, then its totals, then
//! two ceilings for extractive items, which are not summarizers: with the
//! gold in hand, the best single sentence of the transcript for each gold
//! item, and the best single whole turn. Items cut from what was said
//! cannot cover more gold than their ceiling, whatever the ranking.
//! Baseline in the same run: "every commitment sentence", each sentence of
//! the transcript with "will", "should", "let's", "to do" or "need to",
//! scored the same way. The minutes are not complete lists, so precision
//! is indicative only. Run: `cargo bench --bench summary_quality`.

use std::collections::BTreeSet;
use std::time::Instant;

use mnemo::model::{Role, SessionSummary, Trigger, Turn};
use mnemo::summarize::{summarize, SummaryContext};
use serde::Deserialize;

#[derive(Deserialize)]
struct Set {
    meetings: Vec<Meeting>,
}

#[derive(Deserialize)]
struct Meeting {
    id: String,
    participants: Vec<String>,
    turns: Vec<RawTurn>,
    gold: Vec<String>,
    /// Per gold item, the 0-based inclusive turn ranges of its evidence.
    #[serde(default)]
    gold_spans: Vec<Vec<(usize, usize)>>,
}

#[derive(Deserialize)]
struct RawTurn {
    speaker: String,
    content: String,
}

const STOP: &[&str] = &[
    "the", "a", "an", "and", "or", "but", "of", "to", "in", "on", "for", "with", "at", "by",
    "from", "as", "is", "are", "was", "were", "be", "been", "it", "its", "this", "that", "these",
    "those", "we", "you", "i", "he", "she", "they", "them", "our", "your", "my", "me", "us",
    "will", "would", "should", "can", "could", "do", "does", "did", "so", "if", "not", "no", "yes",
    "yeah", "ok", "okay", "um", "uh", "hmm", "just", "also", "then", "there", "here", "what",
    "which", "who", "how", "all", "some", "any", "have", "has", "had", "there's", "it's", "i'll",
    "we'll", "let's", "don't", "about", "into", "out", "up",
];

fn content_words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\'').to_lowercase())
        .filter(|w| w.len() > 1 && !STOP.contains(&w.as_str()))
        .collect()
}

fn covered(gold: &str, items: &[String]) -> bool {
    let g = content_words(gold);
    !g.is_empty()
        && items.iter().any(|i| {
            let w = content_words(i);
            g.intersection(&w).count() as f64 / g.len() as f64 >= 0.5
        })
}

const SOCIAL: &[&str] = &[
    "hello", "hi", "hey", "welcome", "thanks", "thank", "bye", "goodbye", "sorry", "cheers",
    "morning",
];

fn is_junk(text: &str) -> bool {
    let stripped: String = text
        .split('<')
        .enumerate()
        .map(|(i, p)| {
            if i == 0 {
                p
            } else {
                p.split_once('>').map_or("", |(_, r)| r)
            }
        })
        .collect();
    let words = content_words(&stripped);
    words.len() < 3 || words.iter().all(|w| SOCIAL.contains(&w.as_str()))
}

fn turns_of(m: &Meeting) -> Vec<Turn> {
    m.turns
        .iter()
        .enumerate()
        .map(|(i, t)| Turn {
            seq: i as u64 + 1,
            role: Role::User,
            speaker: t.speaker.clone(),
            content: t.content.clone(),
            client_time: None,
            server_time: 1_700_000_000_000_000_000 + i as i64 * 10_000_000_000,
            tool_call: None,
            metadata: Default::default(),
            token_count: (t.content.len() / 4) as u32,
        })
        .collect()
}

/// Words spoken in an hour of meeting, for items per hour.
const WORDS_PER_HOUR: f64 = 9_000.0;

/// Lower-case words of `text`, transcription markers (`<laugh/>`,
/// `{vocalsound}`) left out.
fn plain_words(text: &str) -> Vec<String> {
    mnemo::summarize::rules::strip_markers(text)
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Whether the words of `item` appear in order in `turn`.
fn in_order(item: &str, turn: &str) -> bool {
    let turn = plain_words(turn);
    let mut at = turn.iter();
    plain_words(item).iter().all(|w| at.any(|t| t == w))
}

#[derive(Default)]
struct Score {
    gold: usize,
    found: usize,
    items: usize,
    junk: usize,
    bad_owners: usize,
    unfaithful: usize,
    words: usize,
    millis: f64,
    spanned_gold: usize,
    span_found: usize,
}

/// Gold items of `m` whose evidence span holds one of `cited` (1-based seqs).
fn span_hits(m: &Meeting, cited: &BTreeSet<u64>) -> usize {
    m.gold_spans
        .iter()
        .filter(|spans| {
            spans
                .iter()
                .any(|&(a, b)| cited.range(a as u64 + 1..=b as u64 + 1).next().is_some())
        })
        .count()
}

fn main() {
    let paths = std::env::var("MNEMO_MEETING_SET").unwrap_or_else(|_| {
        concat!(
            "ELITR fixture=",
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/meetings_elitr/dev.json"
        )
        .to_owned()
    });
    let mut table = Vec::new();
    for entry in paths.split(',').filter(|p| !p.is_empty()) {
        // "name=path" names a set; a bare path is its own name.
        let (name, path) = entry.split_once('=').unwrap_or((entry, entry));
        let (ours, base, ceiling) = score_set(path);
        print_totals(path, &ours, &base);
        println!(
            "extractive ceilings (gold in hand): one sentence {:.2} ({}/{}), one whole turn {:.2} ({}/{})",
            ceiling.sentence as f64 / ceiling.gold.max(1) as f64,
            ceiling.sentence,
            ceiling.gold,
            ceiling.turn as f64 / ceiling.gold.max(1) as f64,
            ceiling.turn,
            ceiling.gold
        );
        table.push((name.to_owned(), ours, base, ceiling));
    }
    // Every set in one table: recall beside the baseline and the
    // one-sentence ceiling of the same run, and its share of that ceiling.
    println!("\nall sets\n");
    println!("| set | meetings' gold | mnemo recall | baseline recall | one-sentence ceiling | mnemo ÷ ceiling | items per hour | junk rate | non-participant owners | unfaithful |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, ours, base, ceiling) in &table {
        let r = |s: &Score| s.found as f64 / s.gold.max(1) as f64;
        let c = ceiling.sentence as f64 / ceiling.gold.max(1) as f64;
        println!(
            "| {name} | {} | {:.2} | {:.2} | {c:.2} | {:.2} | {:.1} | {:.2} | {} | {} |",
            ours.gold,
            r(ours),
            r(base),
            if c > 0.0 { r(ours) / c } else { 0.0 },
            ours.items as f64 * WORDS_PER_HOUR / ours.words.max(1) as f64,
            ours.junk as f64 / ours.items.max(1) as f64,
            ours.bad_owners,
            ours.unfaithful
        );
    }
}

/// The sentences of `m`'s transcript (split at '.', '?' and '!'), each
/// with the 1-based seq of its turn.
fn sentences_of(m: &Meeting) -> Vec<(u64, String)> {
    m.turns
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            t.content
                .split(['.', '?', '!'])
                .map(move |s| (i as u64 + 1, s.trim().to_owned()))
        })
        .collect()
}

/// Gold items that one sentence, or one whole turn, of the transcript
/// covers: how far items cut from what was said can go.
#[derive(Default)]
struct Ceiling {
    gold: usize,
    sentence: usize,
    turn: usize,
}

impl Ceiling {
    fn add(&mut self, m: &Meeting) {
        let turns: Vec<String> = m.turns.iter().map(|t| t.content.clone()).collect();
        let sentences: Vec<String> = sentences_of(m).into_iter().map(|(_, s)| s).collect();
        self.gold += m.gold.len();
        self.sentence += m.gold.iter().filter(|g| covered(g, &sentences)).count();
        self.turn += m.gold.iter().filter(|g| covered(g, &turns)).count();
    }
}

fn score_set(path: &str) -> (Score, Score, Ceiling) {
    let (mut ours, mut base) = (Score::default(), Score::default());
    let mut ceiling = Ceiling::default();
    println!("\n{path}\n");
    println!("| meeting | turns | gold | mnemo recall | mnemo items | junk | non-participant owners | unfaithful | baseline recall | baseline items | fold ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    {
        let set: Set = serde_json::from_str(&std::fs::read_to_string(path).expect("meeting set"))
            .expect("set json");
        for m in &set.meetings {
            ceiling.add(m);
            let turns = turns_of(m);
            let ctx = SummaryContext {
                namespace: String::new(),
                context_limit_tokens: 128_000,
                bundle_tokens: 0,
                trigger: Trigger::Close,
                version: 1,
                now: 1_700_000_000_000_000_000,
                high_risk: false,
                wait_free: false,
            };
            let started = Instant::now();
            let s: SessionSummary = summarize(&turns, &ctx);
            let millis = started.elapsed().as_secs_f64() * 1e3;
            let items: Vec<String> = s
                .decisions
                .iter()
                .map(|d| d.decision.clone())
                .chain(s.pending_actions.iter().map(|a| a.action.clone()))
                .collect();
            let cited = |seqs: &[u64]| -> Vec<&str> {
                seqs.iter()
                    .filter_map(|&q| turns.get((q as usize).wrapping_sub(1)))
                    .map(|t| t.content.as_str())
                    .collect()
            };
            let unfaithful = s
                .decisions
                .iter()
                .map(|d| (d.decision.as_str(), &d.evidence_seqs))
                .chain(
                    s.pending_actions
                        .iter()
                        .map(|a| (a.action.as_str(), &a.evidence_seqs)),
                )
                .filter(|(text, seqs)| !cited(seqs).iter().any(|t| in_order(text, t)))
                .count();
            let participants: BTreeSet<String> = m.participants.iter().cloned().collect();
            let bad_owners = s
                .pending_actions
                .iter()
                .filter(|a| {
                    let o = a.owner.trim_matches(|c| c == '[' || c == ']');
                    a.owner != "unassigned"
                        && !participants.contains(o)
                        && !a.evidence_seqs.iter().any(|&q| {
                            turns
                                .get(q as usize - 1)
                                .is_some_and(|t| t.content.contains(&a.owner))
                        })
                })
                .count();
            let baseline_cited: Vec<(u64, String)> = sentences_of(m)
                .into_iter()
                .filter(|(_, s)| {
                    let l = format!(" {} ", s.to_lowercase());
                    [" will ", " should ", " let's ", " to do ", " need to "]
                        .iter()
                        .any(|c| l.contains(c))
                })
                .collect();
            let baseline: Vec<String> = baseline_cited.iter().map(|(_, s)| s.clone()).collect();
            let our_cited: BTreeSet<u64> = s
                .decisions
                .iter()
                .flat_map(|d| d.evidence_seqs.iter().copied())
                .chain(
                    s.pending_actions
                        .iter()
                        .flat_map(|a| a.evidence_seqs.iter().copied()),
                )
                .collect();
            let base_cited: BTreeSet<u64> = baseline_cited.iter().map(|(q, _)| *q).collect();
            if std::env::var_os("MNEMO_BENCH_SHOW_ITEMS").is_some() {
                println!("  truncated: {:?}", s.truncated);
                for d in &s.decisions {
                    println!(
                        "  decision{} {:?} {:?}",
                        if is_junk(&d.decision) { " [junk]" } else { "" },
                        d.decision,
                        d.evidence_seqs
                    );
                }
                for a in &s.pending_actions {
                    println!(
                        "  action{} {:?} owner {:?} {:?}",
                        if is_junk(&a.action) { " [junk]" } else { "" },
                        a.action,
                        a.owner,
                        a.evidence_seqs
                    );
                }
                for g in &m.gold {
                    println!(
                        "  gold{} {g:?}",
                        if covered(g, &items) { " [found]" } else { "" }
                    );
                }
            }
            let found = m.gold.iter().filter(|g| covered(g, &items)).count();
            let base_found = m.gold.iter().filter(|g| covered(g, &baseline)).count();
            let words: usize = m
                .turns
                .iter()
                .map(|t| t.content.split_whitespace().count())
                .sum();
            let junk = items.iter().filter(|i| is_junk(i)).count();
            println!(
                "| {} | {} | {} | {}/{} | {} | {} | {} | {} | {}/{} | {} | {:.1} |",
                m.id,
                turns.len(),
                m.gold.len(),
                found,
                m.gold.len(),
                items.len(),
                junk,
                bad_owners,
                unfaithful,
                base_found,
                m.gold.len(),
                baseline.len(),
                millis
            );
            for (acc, f, n, j, b, u, sf) in [
                (
                    &mut ours,
                    found,
                    items.len(),
                    junk,
                    bad_owners,
                    unfaithful,
                    span_hits(m, &our_cited),
                ),
                (
                    &mut base,
                    base_found,
                    baseline.len(),
                    baseline.iter().filter(|i| is_junk(i)).count(),
                    0,
                    0,
                    span_hits(m, &base_cited),
                ),
            ] {
                acc.spanned_gold += m.gold_spans.len();
                acc.span_found += sf;
                acc.gold += m.gold.len();
                acc.found += f;
                acc.items += n;
                acc.junk += j;
                acc.bad_owners += b;
                acc.unfaithful += u;
                acc.words += words;
                acc.millis += millis;
            }
        }
    }
    (ours, base, ceiling)
}

fn print_totals(path: &str, ours: &Score, base: &Score) {
    let per_k = |s: &Score| s.items as f64 * 1000.0 / s.words.max(1) as f64;
    let per_hour = |s: &Score| s.items as f64 * WORDS_PER_HOUR / s.words.max(1) as f64;
    let span = |s: &Score| {
        if s.spanned_gold == 0 {
            "–".to_owned()
        } else {
            format!(
                "{:.2} ({}/{})",
                s.span_found as f64 / s.spanned_gold as f64,
                s.span_found,
                s.spanned_gold
            )
        }
    };
    println!("\ntotals, {path}\n");
    println!("| all meetings | recall | span recall | items | items per 1,000 words | items per hour | junk rate | non-participant owners | unfaithful |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, s) in [
        ("mnemo (rules)", ours),
        ("baseline: every commitment sentence", base),
    ] {
        println!(
            "| {name} | {:.2} ({}/{}) | {} | {} | {:.1} | {:.1} | {:.2} | {} | {} |",
            s.found as f64 / s.gold.max(1) as f64,
            s.found,
            s.gold,
            span(s),
            s.items,
            per_k(s),
            per_hour(s),
            s.junk as f64 / s.items.max(1) as f64,
            s.bad_owners,
            s.unfaithful
        );
    }
    println!("\nfold time, all meetings: {:.1} ms", ours.millis);
}
