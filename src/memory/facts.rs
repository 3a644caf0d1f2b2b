//! Semantic memory: durable facts and preferences about a subject. The
//! rules every store follows live here as pure functions: a keyed fact
//! supersedes the current fact of its key (never overwriting it), an
//! unkeyed fact with the same normalized words is merged into the one
//! already stored, and a client's fact wins over an extracted one. The
//! extraction of candidate facts from a session's summary and its user
//! turns lives here too; it invents nothing (every candidate is a turn's
//! own words, citing that turn).

use crate::error::{Error, Result};
pub use crate::model::limits::{
    MAX_FACT_BYTES, MAX_KEY_CHARS, MAX_SOURCES, MAX_TAGS, MAX_TAG_CHARS,
};
pub use crate::model::{
    normalized, Fact, FactFilter, FactOrigin, FactPlan, FactSource, NewFact, PutOutcome,
};
use crate::model::{Role, Turn, UnixNanos};
use crate::summarize::{rules, SessionSummary};

/// Checks a new fact's fields.
pub fn validate(f: &NewFact) -> Result<()> {
    super::validate::id("namespace", &f.namespace)?;
    if f.subject_id.is_empty() {
        return Err(Error::invalid("subject_id is required for a fact"));
    }
    super::validate::name("subject_id", &f.subject_id, super::validate::MAX_NAME_BYTES)?;
    if !f.key.is_empty() {
        let ok = f.key.chars().count() <= MAX_KEY_CHARS
            && f.key.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '.' | '-')
            });
        if !ok {
            return Err(Error::invalid(format!(
                "key {:?} must be 1 to {MAX_KEY_CHARS} characters of a-z 0-9 _ . -",
                f.key
            )));
        }
    }
    if normalized(&f.text).is_empty() {
        return Err(Error::invalid("text is required and must hold a word"));
    }
    if f.text.len() > MAX_FACT_BYTES {
        return Err(Error::invalid(format!(
            "text is {} bytes; the limit is {MAX_FACT_BYTES}",
            f.text.len()
        )));
    }
    if f.tags.len() > MAX_TAGS {
        return Err(Error::invalid(format!(
            "{} tags; the limit is {MAX_TAGS}",
            f.tags.len()
        )));
    }
    for t in &f.tags {
        tag(t)?;
    }
    if let Some(src) = &f.source {
        super::validate::id("source.session_id", &src.session_id)?;
    }
    Ok(())
}

/// Checks a tag.
pub fn tag(t: &str) -> Result<()> {
    let ok = !t.is_empty()
        && t.chars().count() <= MAX_TAG_CHARS
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "tag {t:?} must be 1 to {MAX_TAG_CHARS} characters of A-Z a-z 0-9 _ . : -"
        )))
    }
}

/// Decides a put. `same_key` is the current fact of the new fact's key
/// (keyed facts); `same_words` the current fact with the same normalized
/// words (unkeyed facts). Pure: no I/O.
pub fn plan_put(
    new: &NewFact,
    same_key: Option<Fact>,
    same_words: Option<Fact>,
    fact_id: String,
    now: UnixNanos,
) -> FactPlan {
    let merge = |mut existing: Fact| {
        let mut changed = false;
        if let Some(src) = &new.source {
            if !existing.sources.contains(src) && existing.sources.len() < MAX_SOURCES {
                existing.sources.push(src.clone());
                changed = true;
            }
        }
        for t in &new.tags {
            if !existing.tags.contains(t) && existing.tags.len() < MAX_TAGS {
                existing.tags.push(t.clone());
                changed = true;
            }
        }
        if changed {
            existing.updated_at = now;
        }
        FactPlan {
            fact: existing,
            outcome: PutOutcome::Merged,
            write: changed,
        }
    };
    let fresh = |supersedes: String| Fact {
        namespace: new.namespace.clone(),
        fact_id: fact_id.clone(),
        subject_id: new.subject_id.clone(),
        key: new.key.clone(),
        text: new.text.clone(),
        sources: new.source.iter().cloned().collect(),
        tags: new.tags.clone(),
        origin: new.origin,
        supersedes,
        superseded_by: String::new(),
        created_at: now,
        updated_at: now,
    };
    if let Some(old) = same_key {
        if normalized(&old.text) == normalized(&new.text) {
            return merge(old);
        }
        if new.origin == FactOrigin::Extracted && old.origin == FactOrigin::Client {
            return FactPlan {
                fact: old,
                outcome: PutOutcome::KeptClientFact,
                write: false,
            };
        }
        let fact = fresh(old.fact_id.clone());
        let mut old = old;
        old.superseded_by = fact.fact_id.clone();
        old.updated_at = now;
        return FactPlan {
            fact,
            outcome: PutOutcome::Superseded(Box::new(old)),
            write: true,
        };
    }
    if let Some(dup) = same_words {
        return merge(dup);
    }
    FactPlan {
        fact: fresh(String::new()),
        outcome: PutOutcome::Created,
        write: true,
    }
}

/// A turn with its text split into sentences (once, for every rule that
/// reads the turns a summary folded).
#[derive(Debug)]
pub struct SplitTurn<'a> {
    /// The turn.
    pub turn: &'a Turn,
    /// Its content's sentences, slices of it.
    pub sentences: Vec<&'a str>,
}

impl<'a> SplitTurn<'a> {
    /// Splits `turn`.
    pub fn of(turn: &'a Turn) -> SplitTurn<'a> {
        SplitTurn {
            turn,
            sentences: rules::sentences(&turn.content),
        }
    }
}

/// Candidate facts of a session: the summary's key facts, and the
/// preferences and "my X is Y" statements of the user turns in `turns`.
/// Each is a turn's own words and cites that turn.
pub fn extract(
    ns: &str,
    subject_id: &str,
    session_id: &str,
    summary: &SessionSummary,
    turns: &[SplitTurn<'_>],
) -> Vec<NewFact> {
    let mut out = Vec::new();
    let mut push = |key: String, text: String, seq: u64| {
        if text.len() <= MAX_FACT_BYTES && !normalized(&text).is_empty() {
            out.push(NewFact {
                namespace: ns.to_owned(),
                subject_id: subject_id.to_owned(),
                key,
                text,
                source: Some(FactSource {
                    session_id: session_id.to_owned(),
                    seq,
                }),
                tags: Vec::new(),
                origin: FactOrigin::Extracted,
            });
        }
    };
    // A key fact that is a question, or the words of a pending action (a
    // commitment, which may be done by next week), is not a fact about
    // the subject.
    let actions: Vec<String> = summary
        .pending_actions
        .iter()
        .map(|a| normalized(&a.action))
        .collect();
    for f in &summary.key_facts {
        // What the subject (a user turn, or the subject speaking) states;
        // an agent's working remarks ("I see two charges") are not facts
        // about the subject.
        let cited_user = turns
            .iter()
            .any(|t| t.turn.role == Role::User && f.evidence_seqs.contains(&t.turn.seq));
        if !(cited_user || f.stated_by == subject_id) {
            continue;
        }
        let words = normalized(&f.fact);
        let is_action = actions
            .iter()
            .any(|a| !a.is_empty() && (a.contains(&words) || words.contains(a.as_str())));
        if is_action || rules::is_question(&f.fact) {
            continue;
        }
        let seq = f.evidence_seqs.first().copied().unwrap_or(0);
        push(String::new(), f.fact.clone(), seq);
    }
    for t in turns.iter().filter(|t| t.turn.role == Role::User) {
        for s in &t.sentences {
            if let Some((key, text)) = statement(s) {
                push(key, text, t.turn.seq);
            }
        }
    }
    out
}

/// Words that open a stated preference when a sentence starts with them.
const PREFERENCE_OPENERS: [&str; 6] = [
    "always ",
    "never ",
    "please always ",
    "please never ",
    "please don't ever ",
    "don't ever ",
];
/// Words that make a stated preference anywhere in a sentence.
const PREFERENCE_MARKERS: [&str; 7] = [
    "i prefer ",
    "i'd prefer ",
    "i would prefer ",
    "i'd rather ",
    "i always ",
    "i never ",
    "my preference is ",
];

/// Words a correction may open with.
const CORRECTION_OPENERS: [&str; 8] = [
    "actually",
    "sorry",
    "correction:",
    "oh",
    "also",
    "well",
    "update:",
    "by the way",
];

/// A user's sentence as a fact: `("key", text)` for "my X is Y" (the key
/// is X in snake case), `("", text)` for a stated preference.
fn statement(sentence: &str) -> Option<(String, String)> {
    let s = sentence.trim();
    // "Actually, my X is Y" corrects an earlier "my X is Y".
    let lower_all = s.to_lowercase();
    let skip = CORRECTION_OPENERS
        .iter()
        .find(|o| {
            lower_all
                .strip_prefix(*o)
                .is_some_and(|rest| o.ends_with(':') || rest.starts_with([',', ' ']))
        })
        .map_or(0, |o| o.len());
    let lower = lower_all[skip..].trim_start_matches([',', ' ']).to_owned();
    if s.is_empty() || s.ends_with('?') {
        return None;
    }
    if let Some(rest) = lower.strip_prefix("my ") {
        if let Some(pos) = rest.find(" is ") {
            let subject = &rest[..pos];
            let words: Vec<&str> = subject.split_whitespace().collect();
            let value = rest[pos + 4..].trim();
            let plain = words.len() <= 3
                && words
                    .iter()
                    .all(|w| w.chars().all(|c| c.is_alphanumeric() || c == '-'));
            if plain && !value.is_empty() && !words.is_empty() {
                let key: String = words.join("_").replace('-', "_");
                if key.is_ascii() {
                    return Some((key, s.to_owned()));
                }
            }
        }
    }
    let preference = PREFERENCE_OPENERS.iter().any(|p| lower.starts_with(p))
        || PREFERENCE_MARKERS
            .iter()
            .any(|p| lower.starts_with(p) || lower.contains(&format!(" {p}")));
    preference.then(|| (String::new(), s.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(key: &str, text: &str, origin: FactOrigin) -> NewFact {
        NewFact {
            namespace: "ns".into(),
            subject_id: "u1".into(),
            key: key.into(),
            text: text.into(),
            source: Some(FactSource {
                session_id: "s1".into(),
                seq: 3,
            }),
            tags: vec!["t".into()],
            origin,
        }
    }

    #[test]
    fn keyed_facts_supersede_and_same_words_merge() {
        let first = plan_put(
            &new("lang", "Prefers Spanish.", FactOrigin::Client),
            None,
            None,
            "F1".into(),
            1,
        );
        assert_eq!(first.outcome, PutOutcome::Created);
        let second = plan_put(
            &new("lang", "Prefers English now", FactOrigin::Client),
            Some(first.fact.clone()),
            None,
            "F2".into(),
            2,
        );
        match &second.outcome {
            PutOutcome::Superseded(old) => {
                assert_eq!(old.superseded_by, "F2");
                assert_eq!(old.text, "Prefers Spanish.");
            }
            o => panic!("{o:?}"),
        }
        assert_eq!(second.fact.supersedes, "F1");
        // The same words again (case and punctuation aside) merge.
        let mut again = new("lang", "prefers english NOW!", FactOrigin::Client);
        again.source = Some(FactSource {
            session_id: "s2".into(),
            seq: 9,
        });
        let third = plan_put(&again, Some(second.fact.clone()), None, "F3".into(), 3);
        assert_eq!(third.outcome, PutOutcome::Merged);
        assert_eq!(third.fact.fact_id, "F2");
        assert_eq!(third.fact.sources.len(), 2);
        assert!(third.write);
        // The same source again changes nothing: nothing to write.
        let fourth = plan_put(&again, Some(third.fact.clone()), None, "F4".into(), 4);
        assert_eq!(fourth.outcome, PutOutcome::Merged);
        assert!(!fourth.write);
    }

    #[test]
    fn an_extracted_fact_never_replaces_a_client_fact() {
        let client = plan_put(
            &new("email", "my email is a@b.example", FactOrigin::Client),
            None,
            None,
            "F1".into(),
            1,
        )
        .fact;
        let p = plan_put(
            &new("email", "my email is c@d.example", FactOrigin::Extracted),
            Some(client.clone()),
            None,
            "F2".into(),
            2,
        );
        assert_eq!(p.outcome, PutOutcome::KeptClientFact);
        assert_eq!(p.fact, client);
    }

    #[test]
    fn statements_become_keyed_or_unkeyed_facts() {
        assert_eq!(
            statement("My preferred language is Portuguese."),
            Some((
                "preferred_language".into(),
                "My preferred language is Portuguese.".into()
            ))
        );
        assert_eq!(
            statement("I prefer email over phone calls"),
            Some((String::new(), "I prefer email over phone calls".into()))
        );
        assert!(statement("Always CC my manager.").is_some());
        assert!(statement("It never arrived").is_none());
        assert!(statement("My order is late?").is_none());
        assert!(statement("Is my order late").is_none());
        assert!(statement("my very long winded thing here is x").is_none());
        assert_eq!(
            statement("Actually, my favourite colour is blue now.").map(|(k, _)| k),
            Some("favourite_colour".to_owned())
        );
    }

    #[test]
    fn validation_names_the_field() {
        let mut f = new("Bad Key", "x", FactOrigin::Client);
        assert!(validate(&f).unwrap_err().to_string().contains("key"));
        f.key = String::new();
        f.text = "  ...  ".into();
        assert!(validate(&f).unwrap_err().to_string().contains("text"));
        f.text = "x".repeat(MAX_FACT_BYTES + 1);
        assert!(validate(&f).unwrap_err().to_string().contains("4096"));
        f.text = "x".repeat(MAX_FACT_BYTES);
        assert!(validate(&f).is_ok());
        f.tags = vec!["bad tag".into()];
        assert!(validate(&f).unwrap_err().to_string().contains("tag"));
    }
}
