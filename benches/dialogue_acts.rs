//! Does the summarizer's action detector find commitments and requests on
//! conversations no rule was written for? Measured per utterance against
//! dialogue-act labels people made (MRDA meetings: `cc` commit, `co`
//! action directive; Switchboard telephone chat: `ad` action directive,
//! `oo_co_cc` offers and commits), beside two baselines in the same run:
//!
//! - **first-person future**: the utterance holds "I'll", "I will", "I'm
//!   going to", "we'll", "we will", "let me", "let's", "can you", "could
//!   you" or "please" — the plain pattern a commitment detector starts
//!   from;
//! - **cue rules**: the summarizer's cue rules alone (a sentence whose
//!   `action_cue` fires, as before the dialogue-act gate);
//! - **gated**: the cue rules and the dialogue-act gate
//!   (`rules::confidence(Act::Action, …) >= LIST_CONFIDENCE`), which is
//!   what the summarizer lists now.
//!
//! An utterance is detected when any of its clauses is (as the engine
//! reads a turn: sentences, then clauses). Precision and recall carry a
//! 95% Wilson interval.
//!
//! Data: `MNEMO_DA_SETS`, comma-separated `name=path.tsv`; each TSV has a
//! header and columns `conv_id, utt_index, speaker, text, full_tag,
//! positive` (1 for a commitment or directive). The corpora's licences do
//! not allow committing them: the TSVs are made locally (see
//! `docs/summaries.md`). Without the variable the bench says so and ends.
//! `MNEMO_DA_SHOW=fp` (or `fn`) prints the gated detector's false
//! positives (or misses) with their tags. Run: `cargo bench --bench
//! dialogue_acts`.

// Only the interval is used here; the rest scores summaries (the sweep).
#[allow(dead_code)]
#[path = "common/labels.rs"]
mod labels;

use labels::ratio;
use mnemo::summarize::rules::{self, Act};

struct Counts {
    tp: u64,
    fp: u64,
    fn_: u64,
}

impl Counts {
    fn add(&mut self, predicted: bool, gold: bool) {
        match (predicted, gold) {
            (true, true) => self.tp += 1,
            (true, false) => self.fp += 1,
            (false, true) => self.fn_ += 1,
            (false, false) => {}
        }
    }
}

const FPF: &[&str] = &[
    "i'll",
    "i will",
    "i'm going to",
    "i am going to",
    "we'll",
    "we will",
    "let me",
    "let's",
    "can you",
    "could you",
    "please",
];

fn first_person_future(text: &str) -> bool {
    let n = rules::Norm::new(text);
    n.has_any(FPF)
}

/// The clauses the engine would offer the action rules.
fn detected(text: &str, gated: bool) -> bool {
    let (_, sentences) = rules::classify_text(text);
    sentences.iter().any(|c| {
        !c.cues.decision
            && c.cues.maybe_action
            && rules::clauses(c.text).into_iter().any(|clause| {
                rules::action_cue(clause, &[]).is_some()
                    && !rules::is_noise(clause)
                    && (!gated || rules::is_listed(Act::Action, clause))
            })
    })
}

/// Each clause of `text`: its sentence's cues, the action cue and the
/// gate's confidence (what `MNEMO_DA_SHOW=fn-why` prints).
fn explain(text: &str) {
    let (_, sentences) = rules::classify_text(text);
    for c in &sentences {
        for clause in rules::clauses(c.text) {
            println!(
                "      decision={} maybe_action={} cue={} noise={} conf={:.2} | {clause}",
                u8::from(c.cues.decision),
                u8::from(c.cues.maybe_action),
                u8::from(rules::action_cue(clause, &[]).is_some()),
                u8::from(rules::is_noise(clause)),
                rules::confidence(Act::Action, clause)
            );
        }
    }
}

fn main() {
    let Ok(sets) = std::env::var("MNEMO_DA_SETS") else {
        println!("dialogue_acts: MNEMO_DA_SETS is not set (name=path.tsv,...); nothing measured");
        return;
    };
    let show = std::env::var("MNEMO_DA_SHOW").ok();
    println!("| set | utterances | labelled | detector | precision [95%] | recall [95%] |");
    println!("|---|---:|---:|---|---|---|");
    for spec in sets.split(',').filter(|s| !s.is_empty()) {
        let (name, path) = spec.split_once('=').unwrap_or((spec, spec));
        let Ok(text) = std::fs::read_to_string(path) else {
            println!("| {name} | cannot read {path} | | | | |");
            continue;
        };
        let mut counts: Vec<(&str, Counts)> =
            ["first-person future", "cue rules", "gated", "gate alone"]
                .into_iter()
                .map(|d| {
                    (
                        d,
                        Counts {
                            tp: 0,
                            fp: 0,
                            fn_: 0,
                        },
                    )
                })
                .collect();
        let (mut total, mut labelled) = (0u64, 0u64);
        for line in text.lines().skip(1) {
            let cols: Vec<&str> = line.split('\t').collect();
            if cols.len() < 6 {
                continue;
            }
            let (utt, gold) = (cols[3], cols[5].trim() == "1");
            total += 1;
            labelled += u64::from(gold);
            counts[0].1.add(first_person_future(utt), gold);
            let cue = detected(utt, false);
            counts[1].1.add(cue, gold);
            let gated = cue && detected(utt, true);
            counts[2].1.add(gated, gold);
            let alone = rules::sentences(utt)
                .into_iter()
                .any(|x| rules::is_listed(Act::Action, x));
            counts[3].1.add(alone, gold);
            // MNEMO_DA_SHOW=fp|fn prints the gated detector's errors;
            // MNEMO_DA_SHOW=fn-why also each clause's cue and confidence.
            match (show.as_deref(), gated, gold) {
                (Some("fp"), true, false) | (Some("fn"), false, true) => {
                    println!("  {} [{}] {utt}", cols[4], u8::from(cue));
                }
                (Some("fn-why"), false, true) => {
                    println!("  {} [{}] {utt}", cols[4], u8::from(cue));
                    explain(utt);
                }
                _ => {}
            }
        }
        for (d, c) in &counts {
            println!(
                "| {name} | {total} | {labelled} | {d} | {} | {} |",
                ratio(c.tp, c.tp + c.fp),
                ratio(c.tp, c.tp + c.fn_)
            );
        }
    }
}
