//! What an action waits for and how urgent it is: dependency clauses and
//! priority words. Pure functions of their input; they return slices of it.

use super::*;

/// What an action waits for: the clause after "after", "once", "waiting
/// for/on", "depends on", "blocked by/on", "as soon as", "pending" — a
/// slice of the sentence up to the next comma or end, at most eight words.
pub fn depends_on(sentence: &str) -> Vec<&str> {
    const MARKERS: &[&str] = &[
        "waiting for",
        "waiting on",
        "depends on",
        "blocked by",
        "blocked on",
        "as soon as",
        "once",
        "after",
        "pending",
    ];
    let lower = sentence.to_lowercase();
    // Lower-casing may change byte lengths for some scripts; then offsets
    // would not line up, so only work on text where they match.
    if lower.len() != sentence.len() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for m in MARKERS {
        let mut from = 0;
        while let Some(i) = lower[from..].find(m) {
            let at = from + i;
            from = at + m.len();
            let before_ok = at == 0 || !lower.as_bytes()[at - 1].is_ascii_alphanumeric();
            let after_ok = lower
                .as_bytes()
                .get(at + m.len())
                .is_some_and(|b| *b == b' ');
            if !before_ok || !after_ok {
                continue;
            }
            let rest = &sentence[at + m.len()..];
            let end = rest
                .find([',', ';', '.', '!', '?'])
                .map_or(rest.len(), |e| {
                    // Keep dots inside tokens ("v1.2", "$49.99").
                    let mut e = e;
                    while rest.as_bytes().get(e) == Some(&b'.')
                        && rest
                            .as_bytes()
                            .get(e + 1)
                            .is_some_and(|b| !b.is_ascii_whitespace())
                    {
                        e = rest[e + 1..]
                            .find([',', ';', '.', '!', '?'])
                            .map_or(rest.len(), |x| e + 1 + x);
                    }
                    e
                });
            let clause = rest[..end].trim();
            let clause = if clause.split_whitespace().count() > 8 {
                let mut idx = clause.len();
                for (k, (i, _)) in clause.match_indices(' ').enumerate() {
                    if k == 7 {
                        idx = i;
                        break;
                    }
                }
                &clause[..idx]
            } else {
                clause
            };
            // "after that" / "once done" name nothing.
            if !content_words(clause).is_empty() && !out.contains(&clause) {
                out.push(clause);
            }
        }
    }
    out
}

/// Priority words: "urgent", "asap", "critical", "blocking" → HIGH; "when
/// you can", "low priority", "nice to have" → LOW; else MEDIUM.
pub fn priority(text: &str) -> Priority {
    let n = Norm::new(text);
    if n.has_any(&[
        "urgent",
        "urgently",
        "asap",
        "critical",
        "blocking",
        "blocker",
        "immediately",
        "high priority",
        "right away",
        "p0",
        "p1",
        "emergency",
        "top priority",
    ]) {
        Priority::High
    } else if n.has_any(&[
        "when you can",
        "low priority",
        "nice to have",
        "no rush",
        "whenever",
        "eventually",
        "if you have time",
        "not urgent",
        "someday",
        "p3",
    ]) {
        Priority::Low
    } else {
        Priority::Medium
    }
}
