//! Rendering the folded state as a `SessionSummary`, and its prose.
//! Part of the fold: no I/O, no clock.

use super::*;

/// Key facts a summary of `turns` turns shows: 12, plus one per 10 turns.
pub(super) fn key_facts_shown(turns: u64) -> usize {
    12 + usize::try_from(turns / 10).unwrap_or(usize::MAX)
}

/// The last share of a session whose items count as its wrap-up.
const LATE_SHARE: f32 = 0.15;

/// Sessions shorter than this have no wrap-up to speak of.
const LATE_MIN_SEQ: u64 = 40;

impl FoldState {
    // -- rendering ---------------------------------------------------------------

    /// The summary of everything folded so far.
    pub fn render(&self, ctx: &SummaryContext) -> SessionSummary {
        let review = |text: &str| ctx.high_risk && rules::is_irreversible(text);
        let (topics, weights) = self.topic_segments();
        let (shown_decisions, shown_actions, cut) = self.ranked_items(&topics);
        let decisions: Vec<Decision> = shown_decisions
            .iter()
            .map(|d| Decision {
                requires_human_review: review(&d.decision),
                ..(*d).clone()
            })
            .collect();
        let pending_actions: Vec<PendingAction> = shown_actions
            .iter()
            .map(|a| PendingAction {
                requires_human_review: review(&a.action),
                ..(*a).clone()
            })
            .collect();
        let tool_calls: Vec<ToolCallEntry> = self
            .tool_calls
            .iter()
            .map(|t| ToolCallEntry {
                requires_human_review: review(&t.tool_name),
                ..t.clone()
            })
            .collect();
        let requires_human_review = decisions.iter().any(|d| d.requires_human_review)
            || pending_actions.iter().any(|a| a.requires_human_review)
            || tool_calls.iter().any(|t| t.requires_human_review);

        let topic = weights
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
            .and_then(|(i, _)| topics.get(i))
            .map(|t| t.topic.clone())
            .unwrap_or_default();

        let mut stale: Vec<String> = Vec::new();
        for a in self.artifacts.iter().filter(|a| a.expiry_seq != 0) {
            if !stale.contains(&a.artifact_id) {
                stale.push(a.artifact_id.clone());
            }
        }
        let budget = i64::try_from(ctx.context_limit_tokens)
            .unwrap_or(i64::MAX)
            .saturating_sub(i64::try_from(ctx.bundle_tokens).unwrap_or(i64::MAX));

        // Key facts scale with the session: a session whose every turn
        // names an identifier keeps its newest ones, and says how many
        // older ones it leaves out.
        let fact_limit = key_facts_shown(self.total_turns);
        let hidden_facts = self.facts.len().saturating_sub(fact_limit);
        let key_facts = self.facts[hidden_facts..].to_vec();
        let mut truncated = self.truncation_note();
        if cut > 0 {
            if !truncated.is_empty() {
                truncated.push_str("; ");
            }
            truncated.push_str(&format!(
                "{cut} less salient decisions and pending_actions not shown (at most {} for {} words)",
                rules::items_shown(self.conv_words),
                self.conv_words
            ));
        }
        if hidden_facts > 0 {
            if !truncated.is_empty() {
                truncated.push_str("; ");
            }
            truncated.push_str(&format!(
                "{hidden_facts} older key_facts not shown (at most {fact_limit} for {} turns)",
                self.total_turns
            ));
        }
        let (user_intent, user_intent_seq) = self.user_intent.clone().unwrap_or_default();
        let outcome = self.outcome();
        let duration_ns = match (self.first_time, self.last_time) {
            (Some(a), Some(b)) => b.saturating_sub(a).max(0),
            _ => 0,
        };
        let missing_dependencies = self.missing_dependencies(&pending_actions);
        let mut summary = SessionSummary {
            user_intent,
            user_intent_seq,
            topic,
            outcome,
            decisions,
            pending_actions,
            open_questions: self.questions.clone(),
            key_facts,
            tool_calls,
            artifacts: self.artifacts.clone(),
            context_health: ContextHealth {
                stale_artifacts: stale,
                missing_dependencies,
                budget_remaining_tokens: budget,
            },
            truncated,
            errors_and_anomalies: self.anomalies.clone(),
            unresolved_conflicts: self.conflicts.iter().map(|c| c.conflict.clone()).collect(),
            participants: self.participants.clone(),
            topics,
            prose: String::new(),
            covers_through_seq: self.last_seq,
            version: ctx.version,
            trigger: ctx.trigger,
            created_at: ctx.now,
            duration_seconds: u64::try_from(duration_ns / 1_000_000_000).unwrap_or(0),
            total_turns: self.total_turns,
            requires_human_review,
        };
        summary.prose = prose(&summary);
        summary
    }

    /// The decisions and actions the summary shows, in their order: all
    /// of them when they fit [`rules::items_shown`], else the most salient
    /// ones above [`rules::MIN_SALIENCE`]; and how many were left out.
    pub(super) fn ranked_items(
        &self,
        topics: &[TopicSegment],
    ) -> (Vec<&Decision>, Vec<&PendingAction>, usize) {
        let decisions: Vec<&Decision> = self.decisions.iter().map(|d| &d.decision).collect();
        let actions: Vec<&PendingAction> = self.actions.iter().collect();
        let limit = rules::items_shown(self.conv_words);
        let total = decisions.len() + actions.len();
        // A short session shows everything; a long one (past the minimum
        // bound) is ranked even when all would fit, so what says too
        // little to stand alone stays out.
        if total <= limit && limit <= rules::MIN_ITEMS_SHOWN {
            return (decisions, actions, 0);
        }
        let last = self.last_seq.max(1) as f32;
        // Said in the last part of the session: wrap-ups and recaps.
        let late = |seqs: &[u64]| {
            seqs.iter()
                .any(|&s| s as f32 / last > 1.0 - LATE_SHARE && self.last_seq >= LATE_MIN_SEQ)
        };
        let engine = |seqs: &[u64], voices: usize| {
            let mut s = 0.0;
            if voices >= 2 {
                s += 1.5;
            }
            if seqs.len() >= 2 {
                s += 0.5;
            }
            if late(seqs) {
                s += 1.0;
            }
            s
        };
        // Items that name the topic of the stretch they were said in are
        // its substance; asides are not.
        let on_topic = |text: &str, seqs: &[u64]| {
            let Some(&first) = seqs.first() else {
                return 0.0;
            };
            let named = topics
                .iter()
                .filter(|t| t.first_seq <= first && first <= t.last_seq)
                .any(|t| rules::names_topic(text, &t.topic));
            if named {
                rules::TOPIC_SALIENCE
            } else {
                0.0
            }
        };
        // (score, first seq, is_action, index)
        let mut ranked: Vec<(f32, u64, bool, usize)> = Vec::with_capacity(total);
        for (i, d) in decisions.iter().enumerate() {
            let s = rules::text_salience(&d.decision, "")
                + engine(&d.evidence_seqs, d.agreed_by.len())
                + on_topic(&d.decision, &d.evidence_seqs);
            ranked.push((s, d.evidence_seqs.first().copied().unwrap_or(0), false, i));
        }
        for (i, a) in actions.iter().enumerate() {
            let mut s = rules::text_salience(&a.action, &a.owner)
                + engine(&a.evidence_seqs, 1)
                + on_topic(&a.action, &a.evidence_seqs);
            if a.status == ActionStatus::Done {
                s -= 1.0;
            }
            ranked.push((s, a.evidence_seqs.first().copied().unwrap_or(0), true, i));
        }
        // Fewer than three words of substance never stand alone in a
        // ranked summary, whatever agreement or a name adds ("Climb, rob.",
        // "I thought we could point that out." assented to).
        for r in ranked.iter_mut() {
            let text = if r.2 {
                &actions[r.3].action
            } else {
                &decisions[r.3].decision
            };
            if rules::substance_count(text) < 3 {
                r.0 = rules::MIN_SALIENCE;
            }
        }
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        ranked.retain(|r| r.0 > rules::MIN_SALIENCE);
        ranked.truncate(limit);
        // The minimum bound is for short sessions, whose items all count;
        // past the share of the words spoken, only items that stand out
        // use it, so a twenty-minute meeting is not summarized at the
        // density of an hour-long one's best items.
        let by_words = rules::items_shown_by_words(self.conv_words);
        let standing_out = ranked
            .iter()
            .filter(|r| r.0 > rules::FLOOR_SALIENCE)
            .count();
        ranked.truncate(by_words.max(standing_out));
        // The ranked items of one kind, in their own order.
        fn kept<T>(items: Vec<T>, ranked: &[(f32, u64, bool, usize)], action: bool) -> Vec<T> {
            let keep: BTreeSet<usize> = ranked
                .iter()
                .filter(|r| r.2 == action)
                .map(|r| r.3)
                .collect();
            items
                .into_iter()
                .enumerate()
                .filter(|(i, _)| keep.contains(i))
                .map(|(_, x)| x)
                .collect()
        }
        (
            kept(decisions, &ranked, false),
            kept(actions, &ranked, true),
            total - ranked.len(),
        )
    }

    pub(super) fn topic_segments(&self) -> (Vec<TopicSegment>, Vec<u32>) {
        let mut topics = self.topics.clone();
        let mut weights = self.topic_weights.clone();
        if let Some(open) = &self.open_topic {
            // Turns of an unconfirmed shift still belong to the open topic.
            let mut view = open.clone();
            for c in std::mem::take(&mut view.candidate) {
                view.absorb(c);
            }
            topics.push(view.segment());
            weights.push(view.substantive);
        }
        (topics, weights)
    }

    pub(super) fn outcome(&self) -> Outcome {
        let open_actions = self
            .actions
            .iter()
            .filter(|a| a.status != ActionStatus::Done)
            .count();
        let open = open_actions + self.questions.len();
        let resolved =
            self.last_resolution_seq > 0 && self.last_resolution_seq >= self.last_complaint_seq;
        let closing = self
            .closing_conv_index
            .is_some_and(|c| self.conv_index.saturating_sub(c) <= 2);
        if resolved && open == 0 {
            Outcome::Resolved
        } else if !self.actions.is_empty() && open == 0 {
            Outcome::Completed
        } else if open > 0 && closing {
            Outcome::UnresolvedFollowUp
        } else {
            Outcome::InProgress
        }
    }

    /// Dependencies of the open actions the summary shows (`shown`) that
    /// nothing done satisfies: no DONE action, completion statement,
    /// successful tool or artifact covers at least half of the
    /// dependency's words (or names it). Only shown actions count: a
    /// dependency of an action ranked out is no dependency of any action
    /// in the summary, which the validator refuses.
    pub(super) fn missing_dependencies(&self, shown: &[PendingAction]) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for a in shown.iter().filter(|a| a.status != ActionStatus::Done) {
            for d in &a.depends_on {
                let dw = rules::content_words(d);
                let lower = d.to_lowercase();
                let covered = |w: &BTreeSet<String>| rules::overlap(&dw, w) >= 0.5;
                let satisfied = dw.is_empty()
                    || self
                        .actions
                        .iter()
                        .filter(|x| x.status == ActionStatus::Done)
                        .any(|x| covered(&rules::content_words(&x.action)))
                    || self
                        .completions
                        .iter()
                        .any(|c| covered(&c.iter().cloned().collect()))
                    || self
                        .successful_tools
                        .iter()
                        .any(|t| covered(&tool_words(t)))
                    || self
                        .artifacts
                        .iter()
                        .any(|x| lower.contains(&x.artifact_id.to_lowercase()));
                if !satisfied && !out.contains(d) {
                    out.push(d.clone());
                }
            }
        }
        out
    }

    pub(super) fn truncation_note(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.oversized_count > 0 {
            let listed: Vec<String> = self
                .oversized
                .iter()
                .map(|(s, b)| format!("turn {s} ({b} bytes)"))
                .collect();
            let more = self
                .oversized_count
                .saturating_sub(self.oversized.len() as u64);
            let tail = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            parts.push(format!(
                "only the first {MAX_ANALYSED_BYTES} bytes of {}{tail} were analysed",
                listed.join(", ")
            ));
        }
        for (section, n) in &self.dropped {
            parts.push(format!("{n} {section} not kept (bound reached)"));
        }
        parts.join("; ")
    }
}

/// People a meeting's prose names: at most this many, then a count.
const NAMED_IN_PROSE: usize = 4;

/// Topic labels a meeting's prose names.
const TOPICS_IN_PROSE: usize = 3;

/// For a session among people (two or more human speakers, no assistant):
/// who took part and what they talked about, instead of a "user" asking.
/// It names the participants the summary's items cite (owners, askers,
/// those who agreed or stated a fact: each speaks in, or is named by, a
/// cited turn), most cited first, and counts the rest in words; then the
/// main topic and the largest other ones.
fn meeting_line(s: &SessionSummary) -> Option<String> {
    let humans = s
        .participants
        .iter()
        .filter(|p| p.role == Role::User)
        .count();
    if humans < 2 || s.participants.iter().any(|p| p.role == Role::Assistant) {
        return None;
    }
    let mut cited: BTreeMap<&str, usize> = BTreeMap::new();
    let speakers = s
        .decisions
        .iter()
        .flat_map(|d| d.agreed_by.iter())
        .chain(s.pending_actions.iter().map(|a| &a.owner))
        .chain(s.open_questions.iter().map(|q| &q.asked_by))
        .chain(s.key_facts.iter().map(|f| &f.stated_by));
    for name in speakers {
        if s.participants.iter().any(|p| p.speaker == *name) {
            *cited.entry(name.as_str()).or_default() += 1;
        }
    }
    let mut named: Vec<(&str, usize)> = cited.into_iter().collect();
    named.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    named.truncate(NAMED_IN_PROSE);
    let mut names: Vec<String> = named.iter().map(|(n, _)| n.to_string()).collect();
    let others = humans.saturating_sub(names.len()) as u64;
    let kind = if humans == 2 {
        "Conversation between"
    } else {
        "Meeting of"
    };
    let who = if names.is_empty() {
        format!("{} people", rules::number_words(humans as u64))
    } else {
        if others > 0 {
            names.push(format!(
                "{} {}",
                rules::number_words(others),
                if others == 1 { "other" } else { "others" }
            ));
        }
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.concat(),
        }
    };
    let mut topics: Vec<&str> = Vec::new();
    if !s.topic.is_empty() {
        topics.push(&s.topic);
    }
    let mut by_size: Vec<&TopicSegment> = s.topics.iter().collect();
    by_size.sort_by_key(|t| std::cmp::Reverse(t.last_seq - t.first_seq.min(t.last_seq)));
    for t in by_size {
        if topics.len() >= TOPICS_IN_PROSE {
            break;
        }
        if !t.topic.is_empty() && !topics.contains(&t.topic.as_str()) {
            topics.push(&t.topic);
        }
    }
    let about = if topics.is_empty() {
        String::new()
    } else {
        format!(" about {}", topics.join("; "))
    };
    Some(format!("{kind} {who}{about}."))
}

/// One to three sentences built only from the summary's items: the user's
/// intent (quoted), or for a meeting who took part and its topics; counts (in words, so no number appears that no turn
/// contains) and the most pressing open action or question (quoted).
pub fn prose(s: &SessionSummary) -> String {
    // Quotes end the sentence themselves when they end with a mark.
    let quoted = |text: &str| {
        let q = rules::clip(text, 200);
        let end = if q.ends_with(['.', '?', '!', '…']) {
            ""
        } else {
            "."
        };
        format!("\"{q}\"{end}")
    };
    let mut out: Vec<String> = Vec::new();
    if let Some(meeting) = meeting_line(s) {
        out.push(meeting);
    } else if !s.user_intent.is_empty() {
        out.push(format!("The user asked: {}", quoted(&s.user_intent)));
    }
    let open = s
        .pending_actions
        .iter()
        .filter(|a| a.status != ActionStatus::Done)
        .count() as u64;
    let done = s.pending_actions.len() as u64 - open;
    let count = |n: u64, one: &str, many: &str| {
        (n > 0).then(|| {
            format!(
                "{} {}",
                rules::number_words(n),
                if n == 1 { one } else { many }
            )
        })
    };
    let mut counts: Vec<String> = [
        count(s.decisions.len() as u64, "decision", "decisions"),
        count(open, "open action", "open actions"),
        count(done, "done action", "done actions"),
        count(
            s.open_questions.len() as u64,
            "open question",
            "open questions",
        ),
        count(
            s.errors_and_anomalies.len() as u64,
            "tool error",
            "tool errors",
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    let status = match s.outcome {
        Outcome::InProgress => "in progress",
        Outcome::Resolved => "resolved",
        Outcome::UnresolvedFollowUp => "unresolved, follow-up needed",
        Outcome::Completed => "completed",
    };
    out.push(match counts.pop() {
        None => format!("Status: {status}, nothing decided or pending."),
        Some(last) if counts.is_empty() => format!("Status: {status}, with {last}."),
        Some(last) => format!("Status: {status}, with {} and {last}.", counts.join(", ")),
    });
    let rank = |p: Priority| match p {
        Priority::High => 0,
        Priority::Medium => 1,
        Priority::Low => 2,
    };
    let pressing = s
        .pending_actions
        .iter()
        .filter(|a| a.status != ActionStatus::Done)
        .min_by_key(|a| rank(a.priority));
    if let Some(a) = pressing {
        out.push(format!(
            "Most pressing action ({}): {}",
            a.owner,
            quoted(&a.action)
        ));
    } else if let Some(q) = s.open_questions.first() {
        out.push(format!(
            "Open question from {}: {}",
            q.asked_by,
            quoted(&q.question)
        ));
    }
    out.join(" ")
}
