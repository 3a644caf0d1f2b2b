//! The rules are the floor under a model summary: a decision, an open
//! pending action or an unanswered question that the rules' fold of the
//! same turns found with evidence is kept when the model's answer has no
//! item citing any of the same turns. Items are matched one to one, so a
//! model summary never has fewer of them than the rules' fold. The tool
//! log and the errors need no merging: they always come from the rules
//! (`ModelItems::apply` keeps them). Pure: no I/O.

use crate::model::{ActionStatus, SessionSummary};
use crate::summarize::engine;

/// The indexes of `floor` items no `model` item covers: each model item
/// covers at most one floor item, one citing a turn the floor item cites.
fn uncovered(floor: &[&[u64]], model: &[&[u64]]) -> Vec<usize> {
    let mut used = vec![false; model.len()];
    let mut out = Vec::new();
    for (i, f) in floor.iter().enumerate() {
        let hit = model
            .iter()
            .enumerate()
            .find(|(j, m)| !used[*j] && m.iter().any(|s| f.contains(s)));
        match hit {
            Some((j, _)) => used[j] = true,
            None => out.push(i),
        }
    }
    out
}

/// `model` (the model's summary over the rules' base) with the rules'
/// items it lacks merged in, at most mnemo's item limits (the model's own
/// extra items give way first). Returns what was merged, one line per
/// kind, for the audit; empty when nothing was.
pub fn merge(model: &mut SessionSummary, rules: &SessionSummary) -> Vec<String> {
    let mut merged = Vec::new();

    let floor: Vec<_> = rules
        .decisions
        .iter()
        .filter(|d| !d.evidence_seqs.is_empty())
        .collect();
    let missing = {
        let f: Vec<&[u64]> = floor.iter().map(|d| d.evidence_seqs.as_slice()).collect();
        let m: Vec<&[u64]> = model
            .decisions
            .iter()
            .map(|d| d.evidence_seqs.as_slice())
            .collect();
        uncovered(&f, &m)
    };
    if !missing.is_empty() {
        merged.push(describe(
            "decisions",
            missing.iter().map(|&i| &floor[i].evidence_seqs),
        ));
        let keep = engine::MAX_DECISIONS.saturating_sub(missing.len());
        model.decisions.truncate(keep);
        model
            .decisions
            .extend(missing.iter().map(|&i| floor[i].clone()));
    }

    let floor: Vec<_> = rules
        .pending_actions
        .iter()
        .filter(|a| a.status != ActionStatus::Done && !a.evidence_seqs.is_empty())
        .collect();
    let missing = {
        let f: Vec<&[u64]> = floor.iter().map(|a| a.evidence_seqs.as_slice()).collect();
        let m: Vec<&[u64]> = model
            .pending_actions
            .iter()
            .map(|a| a.evidence_seqs.as_slice())
            .collect();
        uncovered(&f, &m)
    };
    if !missing.is_empty() {
        merged.push(describe(
            "pending_actions",
            missing.iter().map(|&i| &floor[i].evidence_seqs),
        ));
        let keep = engine::MAX_ACTIONS.saturating_sub(missing.len());
        model.pending_actions.truncate(keep);
        model
            .pending_actions
            .extend(missing.iter().map(|&i| floor[i].clone()));
    }

    let floor: Vec<_> = rules
        .open_questions
        .iter()
        .filter(|q| !q.evidence_seqs.is_empty())
        .collect();
    let missing = {
        let f: Vec<&[u64]> = floor.iter().map(|q| q.evidence_seqs.as_slice()).collect();
        let m: Vec<&[u64]> = model
            .open_questions
            .iter()
            .map(|q| q.evidence_seqs.as_slice())
            .collect();
        uncovered(&f, &m)
    };
    if !missing.is_empty() {
        merged.push(describe(
            "open_questions",
            missing.iter().map(|&i| &floor[i].evidence_seqs),
        ));
        let keep = engine::MAX_OPEN_QUESTIONS.saturating_sub(missing.len());
        model.open_questions.truncate(keep);
        model
            .open_questions
            .extend(missing.iter().map(|&i| floor[i].clone()));
    }
    merged
}

fn describe<'a>(kind: &str, seqs: impl Iterator<Item = &'a Vec<u64>>) -> String {
    let cited: Vec<String> = seqs.map(|s| format!("{s:?}")).collect();
    format!(
        "model_floor: {} {kind} the model left out kept from the rules (turns {})",
        cited.len(),
        cited.join(" ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Decision, OpenQuestion, PendingAction, Priority, QuestionStatus, Trigger};
    use crate::summarize::{FoldState, SummaryContext};

    fn empty() -> SessionSummary {
        FoldState::default().render(&SummaryContext {
            namespace: "ns".into(),
            context_limit_tokens: 8000,
            bundle_tokens: 0,
            trigger: Trigger::Requested,
            version: 1,
            now: 1,
            high_risk: false,
            wait_free: false,
        })
    }

    fn decision(text: &str, seqs: &[u64]) -> Decision {
        Decision {
            decision: text.into(),
            rationale: String::new(),
            agreed_by: Vec::new(),
            evidence_seqs: seqs.to_vec(),
            requires_human_review: false,
        }
    }

    fn action(text: &str, seqs: &[u64], status: ActionStatus) -> PendingAction {
        PendingAction {
            action: text.into(),
            owner: "ana".into(),
            deadline: "2026-12-01".into(),
            status,
            depends_on: Vec::new(),
            priority: Priority::High,
            evidence_seqs: seqs.to_vec(),
            requires_human_review: false,
        }
    }

    #[test]
    fn an_empty_model_answer_keeps_every_evidenced_rules_item() {
        let mut rules = empty();
        rules.decisions = vec![
            decision("use the red logo", &[4]),
            decision("ship on Friday", &[9]),
        ];
        rules.pending_actions = vec![
            action("send the draft", &[7], ActionStatus::Pending),
            action("book the room", &[8], ActionStatus::Done),
        ];
        rules.open_questions = vec![OpenQuestion {
            question: "who pays?".into(),
            asked_by: "bo".into(),
            status: QuestionStatus::Unanswered,
            evidence_seqs: vec![11],
        }];
        let mut model = empty();
        let merged = merge(&mut model, &rules);
        assert_eq!(model.decisions, rules.decisions);
        // The rules' own item, with its owner, deadline and priority; a
        // done action is no floor.
        assert_eq!(
            model.pending_actions,
            vec![rules.pending_actions[0].clone()]
        );
        assert_eq!(model.open_questions, rules.open_questions);
        assert_eq!(merged.len(), 3, "{merged:?}");
        assert!(merged[0].contains("2 decisions") && merged[0].contains("[4] [9]"));
    }

    #[test]
    fn one_model_item_covers_one_rules_item() {
        let mut rules = empty();
        rules.decisions = vec![decision("a", &[3]), decision("b", &[5])];
        let mut model = empty();
        // One model decision citing both turns covers only one of them.
        model.decisions = vec![decision("a and b", &[3, 5])];
        let merged = merge(&mut model, &rules);
        assert_eq!(model.decisions.len(), 2);
        assert_eq!(model.decisions[1].decision, "b");
        assert_eq!(merged.len(), 1);
        // A model that covers everything is left as it is.
        let mut model = empty();
        model.decisions = vec![decision("B", &[5, 6]), decision("A", &[2, 3])];
        let before = model.clone();
        assert!(merge(&mut model, &rules).is_empty());
        assert_eq!(model, before);
    }

    #[test]
    fn merging_stays_within_the_item_limits() {
        let mut rules = empty();
        rules.decisions = vec![decision("kept", &[1])];
        let mut model = empty();
        model.decisions = (0..engine::MAX_DECISIONS as u64)
            .map(|i| decision("model's", &[i + 2]))
            .collect();
        merge(&mut model, &rules);
        assert_eq!(model.decisions.len(), engine::MAX_DECISIONS);
        assert_eq!(model.decisions.last().unwrap().decision, "kept");
    }
}
