//! Text for a model: what the MCP tools return, each result held to a
//! token bound so that no call can flood the caller's context window
//! (a memory server whose listing costs tens of thousands of tokens is
//! what this avoids). Lines are dropped whole, from the end, and the cut
//! is said in words.

use crate::model::Encoding;
use crate::pb;
use crate::tokens;

/// Lines joined by newlines, cut to at most `max_tokens` (cl100k_base)
/// whole lines; when lines are left out, a last line says how many and
/// how to ask for the rest (`more`).
pub fn bounded(lines: &[String], max_tokens: usize, more: &str) -> String {
    let mut out = String::new();
    let mut used = 0usize;
    for (i, line) in lines.iter().enumerate() {
        // Room kept for the note saying what was left out.
        let cost = tokens::count(Encoding::Cl100kBase, line) + 1;
        let reserve = if i + 1 < lines.len() { 40 } else { 0 };
        if used + cost + reserve > max_tokens {
            let left = lines.len() - i;
            let note = format!("[{left} more not shown: {more}]");
            if tokens::count(Encoding::Cl100kBase, &note) + used <= max_tokens {
                out.push_str(&note);
            }
            return out.trim_end().to_owned();
        }
        used += cost;
        out.push_str(line);
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// A session in one line.
pub fn session_line(s: &pb::Session) -> String {
    let state = pb::SessionState::try_from(s.state)
        .map(|v| {
            v.as_str_name()
                .trim_start_matches("SESSION_STATE_")
                .to_lowercase()
        })
        .unwrap_or_default();
    let mut line = format!("{} ({state}, {} turns", s.session_id, s.turn_count);
    if !s.subject_id.is_empty() {
        line.push_str(&format!(", subject {}", s.subject_id));
    }
    if !s.owner_agent.is_empty() {
        line.push_str(&format!(
            ", owner {} at lease epoch {}",
            s.owner_agent, s.lease_epoch
        ));
    }
    line.push(')');
    if !s.title.is_empty() {
        line.push_str(&format!(" {}", s.title));
    }
    line
}

/// A fact in one line.
pub fn fact_line(f: &pb::Fact) -> String {
    let mut line = format!("{} [{}]", f.text, f.fact_id);
    if !f.key.is_empty() {
        line.push_str(&format!(" key={}", f.key));
    }
    if !f.tags.is_empty() {
        line.push_str(&format!(" tags={}", f.tags.join(",")));
    }
    line
}

/// A pending action in one line, with the reference that updates it.
pub fn action_line(session_id: &str, a: &pb::PendingAction) -> String {
    let status = pb::ActionStatus::try_from(a.status)
        .map(|v| {
            v.as_str_name()
                .trim_start_matches("ACTION_STATUS_")
                .to_lowercase()
        })
        .unwrap_or_default();
    let seq = a.evidence_seqs.first().copied().unwrap_or(0);
    let mut line = format!(
        "{} (owner {}, {status}; session {session_id} action_seq {seq}",
        a.action, a.owner
    );
    if !a.deadline.is_empty() {
        line.push_str(&format!(", due {}", a.deadline));
    }
    line.push(')');
    line
}

/// `text` cut to at most `max` characters, with an ellipsis when cut.
pub fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_keeps_whole_lines_and_says_what_it_left_out() {
        let lines: Vec<String> = (0..500)
            .map(|i| format!("line {i} with a few words in it"))
            .collect();
        let text = bounded(&lines, 200, "ask with a smaller limit");
        assert!(tokens::count(Encoding::Cl100kBase, &text) <= 200);
        assert!(text.starts_with("line 0 with"));
        assert!(text.ends_with("more not shown: ask with a smaller limit]"));
        // Every line shown is whole.
        for l in text.lines().filter(|l| l.starts_with("line")) {
            assert!(l.ends_with("in it"), "{l}");
        }
    }

    #[test]
    fn bounded_returns_everything_that_fits() {
        let lines = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(bounded(&lines, 100, "-"), "a\nb");
    }

    #[test]
    fn shorten_counts_characters_not_bytes() {
        assert_eq!(shorten("ééééé", 3), "ééé…");
        assert_eq!(shorten("abc", 3), "abc");
    }
}
