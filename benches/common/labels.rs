//! Scoring a summary's pending actions, decisions and open questions
//! against turn labels people made (the labelling guideline's scoring, see
//! `docs/summaries.md`): an item is real when a turn it cites carries a
//! label of its kind (pending action: commitment or request; decision:
//! decision or commitment; open question: open_question or request).
//! Precision = real items / items; recall = labelled commitment, request
//! and decision turns cited by some real item / all such turns. Included
//! by path from the summary sweep.

use std::collections::{BTreeMap, BTreeSet};

use mnemo::model::SessionSummary;

/// Labels by turn seq.
pub type Labels = BTreeMap<u64, Vec<String>>;

/// Counts over one or more summaries.
#[derive(Default, Debug, Clone)]
pub struct Score {
    pub items: u64,
    pub real: u64,
    pub actions: (u64, u64),
    pub decisions: (u64, u64),
    pub questions: (u64, u64),
    pub labelled: u64,
    pub found: u64,
    pub wrong_owners: u64,
    pub unassigned: u64,
    /// Items judged not real, for reading.
    pub misses: Vec<String>,
}

fn has(labels: &Labels, seqs: &[u64], kinds: &[&str]) -> bool {
    seqs.iter().any(|s| {
        labels
            .get(s)
            .is_some_and(|l| l.iter().any(|k| kinds.contains(&k.as_str())))
    })
}

impl Score {
    /// Scores one summary; `speakers` are the conversation's speakers.
    pub fn add(&mut self, id: &str, s: &SessionSummary, labels: &Labels, speakers: &[&str]) {
        let mut cited_real: BTreeSet<u64> = BTreeSet::new();
        let mut judge = |kind: &str, text: &str, seqs: &[u64], accepted: &[&str]| -> bool {
            let real = has(labels, seqs, accepted);
            self.items += 1;
            if real {
                self.real += 1;
                cited_real.extend(seqs.iter().copied());
            } else {
                self.misses.push(format!("{id}: {kind} {text:?} {seqs:?}"));
            }
            real
        };
        for a in &s.pending_actions {
            let r = judge(
                "action",
                &a.action,
                &a.evidence_seqs,
                &["commitment", "request"],
            );
            self.actions.0 += u64::from(r);
            self.actions.1 += 1;
            if a.owner == "unassigned" {
                self.unassigned += 1;
            } else if !speakers.contains(&a.owner.as_str()) {
                self.wrong_owners += 1;
            }
        }
        for d in &s.decisions {
            let r = judge(
                "decision",
                &d.decision,
                &d.evidence_seqs,
                &["decision", "commitment"],
            );
            self.decisions.0 += u64::from(r);
            self.decisions.1 += 1;
        }
        for q in &s.open_questions {
            let r = judge(
                "question",
                &q.question,
                &q.evidence_seqs,
                &["open_question", "request"],
            );
            self.questions.0 += u64::from(r);
            self.questions.1 += 1;
        }
        for (seq, l) in labels {
            if l.iter()
                .any(|k| matches!(k.as_str(), "commitment" | "request" | "decision"))
            {
                self.labelled += 1;
                self.found += u64::from(cited_real.contains(seq));
            }
        }
    }
}

/// 95% Wilson interval of `k` in `n`.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n, z) = (k as f64, n as f64, 1.96f64);
    let p = k / n;
    let d = 1.0 + z * z / n;
    let c = p + z * z / (2.0 * n);
    let h = z * ((p * (1.0 - p) + z * z / (4.0 * n)) / n).sqrt();
    ((c - h) / d, (c + h) / d)
}

/// "0.93 [0.80–0.98] (27/29)", or "– (0/0)".
pub fn ratio(k: u64, n: u64) -> String {
    if n == 0 {
        return "– (0/0)".into();
    }
    let (lo, hi) = wilson(k, n);
    format!("{:.2} [{lo:.2}–{hi:.2}] ({k}/{n})", k as f64 / n as f64)
}
