//! Folding items: annotations, intent, owners, questions and answers, decisions, agreements, actions, completions, facts.
//! Part of the fold: no I/O, no clock.

use super::*;

impl FoldState {
    pub(super) fn fold_annotation(
        &mut self,
        a: Annotation,
        seq: u64,
        speaker: &str,
        text: &str,
        time: i64,
    ) {
        let whole = rules::clip(text, MAX_ANNOTATION_CHARS);
        if whole.is_empty() {
            return;
        }
        match a {
            Annotation::Decision => {
                let rationale = rules::sentences(text)
                    .into_iter()
                    .find_map(rules::rationale)
                    .map(|r| rules::clip(r, rules::MAX_ITEM_CHARS))
                    .unwrap_or_default();
                self.push_decision(Decision {
                    decision: whole,
                    rationale,
                    agreed_by: vec![speaker.to_string()],
                    evidence_seqs: vec![seq],
                    requires_human_review: false,
                });
            }
            Annotation::PendingAction => {
                let participants: Vec<String> = self
                    .participants
                    .iter()
                    .map(|p| p.speaker.clone())
                    .collect();
                let cue = rules::sentences(text)
                    .into_iter()
                    .find_map(|s| rules::action_cue(s, &participants));
                let owner_seq = cue
                    .as_ref()
                    .and_then(|c| self.addressee_seq(&c.owner, speaker));
                let owner = cue.map_or_else(
                    || speaker.to_string(),
                    |c| self.owner_name(c.owner, speaker),
                );
                let depends_on = rules::sentences(text)
                    .into_iter()
                    .flat_map(rules::depends_on)
                    .map(str::to_string)
                    .collect();
                let action = PendingAction {
                    action: whole,
                    owner,
                    deadline: rules::deadline(text, time).unwrap_or_default(),
                    status: ActionStatus::Pending,
                    depends_on,
                    priority: rules::priority(text),
                    evidence_seqs: std::iter::once(seq).chain(owner_seq).collect(),
                    requires_human_review: false,
                };
                self.add_action(action, None);
            }
            Annotation::OpenQuestion => self.add_question(seq, speaker, whole),
            Annotation::Fact => self.add_fact(KeyFact {
                fact: whole,
                stated_by: speaker.to_string(),
                evidence_seqs: vec![seq],
            }),
        }
    }

    pub(super) fn note_intent(&mut self, seq: u64, sentences: &[Classified<'_>]) {
        let mut best: Option<&Classified<'_>> = None;
        for c in sentences {
            if matches!(c.kind, TurnKind::Greeting | TurnKind::SmallTalk)
                || c.cues.filler
                || rules::is_cheer(c.text)
            {
                continue;
            }
            if best.is_none_or(|b| c.importance > b.importance) {
                best = Some(c);
            }
        }
        if let Some(c) = best {
            let text = rules::item_text(c.text);
            self.user_intent = Some((text, seq));
        }
    }

    /// The person "you" refers to: the latest other conversational speaker.
    pub(super) fn addressee(&self, speaker: &str) -> Option<String> {
        self.recent_speakers.iter().find(|s| *s != speaker).cloned()
    }

    /// For an action given to "you": the turn just before, when its
    /// speaker is the addressee (the owner), so the action cites a turn
    /// its owner spoke, which is what the validator checks. `None` for
    /// other owners, or when the addressee spoke earlier (then the
    /// pipeline drops the action if no other cited turn is theirs).
    pub(super) fn addressee_seq(&self, cue: &OwnerCue, speaker: &str) -> Option<u64> {
        if *cue != OwnerCue::Addressee {
            return None;
        }
        let addressee = self.addressee(speaker)?;
        self.prev_conv
            .as_ref()
            .filter(|(_, s)| *s == addressee)
            .map(|(seq, _)| *seq)
    }

    pub(super) fn owner_name(&self, cue: OwnerCue, speaker: &str) -> String {
        match cue {
            OwnerCue::Speaker => speaker.to_string(),
            OwnerCue::Addressee => self
                .addressee(speaker)
                .unwrap_or_else(|| UNASSIGNED.to_string()),
            // A participant, or what reads as a person's name; never an
            // interjection or a capitalized first word ("Hmm", "Your EHR").
            OwnerCue::Named(name)
                if self.participants.iter().any(|p| p.speaker == name)
                    || rules::is_person_name(&name) =>
            {
                name
            }
            OwnerCue::Named(_) | OwnerCue::Unassigned => UNASSIGNED.to_string(),
        }
    }

    // -- questions -------------------------------------------------------------

    pub(super) fn add_question(&mut self, seq: u64, speaker: &str, question: String) {
        if self
            .questions
            .iter()
            .any(|q| q.asked_by == speaker && rules::is_near_duplicate(&question, &q.question))
        {
            return;
        }
        if self.questions.len() >= MAX_OPEN_QUESTIONS {
            self.drop_item("open_questions");
            return;
        }
        self.questions.push(OpenQuestion {
            question,
            asked_by: speaker.to_string(),
            status: QuestionStatus::Unanswered,
            evidence_seqs: vec![seq],
        });
    }

    /// A later statement by another participant answers a question when it
    /// is in the reply to the asker's run of turns (chat splits both the
    /// questions and the reply into several messages): the reply takes up
    /// every question of the run it answers. Later, a statement answers a
    /// question when it shares at least half of its content words; sharing
    /// two or more (but fewer than half) answers it partly. A reply that
    /// only defers ("let me check") answers nothing.
    pub(super) fn answer_questions(
        &mut self,
        seq: u64,
        speaker: &str,
        sentences: &[Classified<'_>],
    ) {
        if self.questions.is_empty() {
            return;
        }
        let answer: Vec<&Classified<'_>> =
            sentences.iter().filter(|c| c.cues.answer_like).collect();
        if answer.is_empty() {
            return;
        }
        let words: BTreeSet<String> = answer
            .iter()
            .flat_map(|c| c.content.iter().cloned())
            .collect();
        let qwords: Vec<BTreeSet<String>> = self
            .questions
            .iter()
            .map(|q| rules::content_words(&q.question))
            .collect();
        let mut answered: Vec<bool> = self
            .questions
            .iter()
            .map(|q| {
                q.asked_by != speaker
                    && self.reply_to.as_ref().is_some_and(|(from, to, asker)| {
                        q.asked_by == *asker
                            && q.evidence_seqs
                                .first()
                                .is_some_and(|s| (*from..=*to).contains(s))
                    })
            })
            .collect();
        for (i, q) in self.questions.iter_mut().enumerate() {
            if answered[i] || q.asked_by == speaker {
                continue;
            }
            let shared = qwords[i].intersection(&words).count();
            let need = qwords[i].len().div_ceil(2).max(1);
            if shared >= need {
                answered[i] = true;
            } else if shared >= 2 {
                q.status = QuestionStatus::PartiallyAnswered;
                push_seq(&mut q.evidence_seqs, seq);
            }
        }
        let mut i = 0;
        self.questions.retain(|_| {
            let keep = !answered[i];
            i += 1;
            keep
        });
    }

    // -- decisions -------------------------------------------------------------

    pub(super) fn decision_from(
        &self,
        seq: u64,
        speaker: &str,
        sentence: &str,
        next: Option<&Classified<'_>>,
    ) -> Decision {
        let rationale = rules::rationale(sentence)
            .or_else(|| next.filter(|n| n.cues.reason).map(|n| n.text))
            .map(|r| rules::clip(r, rules::MAX_ITEM_CHARS))
            .unwrap_or_default();
        let mut evidence_seqs = vec![seq];
        // A rationale from the next sentence is in the same turn.
        evidence_seqs.dedup();
        Decision {
            decision: rules::item_text(sentence),
            rationale,
            agreed_by: vec![speaker.to_string()],
            evidence_seqs,
            requires_human_review: false,
        }
    }

    pub(super) fn add_decision(
        &mut self,
        seq: u64,
        speaker: &str,
        sentence: &str,
        next: Option<&Classified<'_>>,
        merge_repeats: bool,
    ) -> Option<u64> {
        let d = self.decision_from(seq, speaker, sentence, next);
        if merge_repeats {
            // The same decision restated is agreement, not a new decision.
            if let Some(item) = self
                .decisions
                .iter_mut()
                .find(|x| rules::is_near_duplicate(&d.decision, &x.decision.decision))
            {
                // Only a new voice adds evidence, and never past the cap:
                // an evicted seq could be the one that names an agreeing
                // speaker, and `agreed_by` must stay provable from the
                // cited turns.
                let d = &mut item.decision;
                if !d.agreed_by.iter().any(|a| a == speaker)
                    && d.evidence_seqs.len() < MAX_EVIDENCE_SEQS
                {
                    d.agreed_by.push(speaker.to_string());
                    push_seq(&mut d.evidence_seqs, seq);
                }
                return Some(item.id);
            }
        }
        self.push_decision(d)
    }

    pub(super) fn push_decision(&mut self, d: Decision) -> Option<u64> {
        if self.decisions.len() >= MAX_DECISIONS {
            self.drop_item("decisions");
            return None;
        }
        let id = self.next_decision_id;
        self.next_decision_id += 1;
        self.decisions.push(DecisionItem { id, decision: d });
        self.recent_decision = Some(RecentDecision {
            id,
            conv_index: self.conv_index,
        });
        Some(id)
    }

    /// A reversal supersedes the live decision it talks about (most shared
    /// words; else the latest). The old decision leaves `decisions`; the
    /// reversal becomes a decision when it decides something itself. When
    /// someone other than those who made the old decision reverses it, the
    /// two stay in conflict until another participant agrees.
    pub(super) fn fold_reversal(
        &mut self,
        seq: u64,
        speaker: &str,
        sentence: &str,
        words: &BTreeSet<String>,
        next: Option<&Classified<'_>>,
    ) {
        let mut target = self.decisions.len() - 1;
        let mut best = 0;
        for (i, d) in self.decisions.iter().enumerate() {
            let shared = rules::content_words(&d.decision.decision)
                .intersection(words)
                .count();
            if shared > best || shared == best && shared > 0 {
                best = shared;
                target = i;
            }
        }
        let old = self.decisions.remove(target).decision;
        let new_text = rules::item_text(sentence);
        if rules::is_decision(sentence) && !rules::is_noise(sentence) {
            self.add_decision(seq, speaker, sentence, next, false);
        }
        if !old.agreed_by.iter().any(|a| a == speaker) {
            if self.conflicts.len() >= MAX_CONFLICTS {
                self.drop_item("unresolved_conflicts");
                return;
            }
            let mut seqs = vec![old.evidence_seqs.first().copied().unwrap_or(seq), seq];
            seqs.sort_unstable();
            seqs.dedup();
            self.conflicts.push(ConflictItem {
                conflict: Conflict {
                    description: format!(
                        "\"{}\" reverses \"{}\"",
                        rules::clip(&new_text, 150),
                        rules::clip(&old.decision, 150)
                    ),
                    conflicting_seqs: seqs,
                },
                reverser: speaker.to_string(),
                conv_index: self.conv_index,
            });
        }
    }

    /// The turn right after a proposal, by someone else, opens with assent
    /// ("Yes, yes. I'm fine with this."): the proposal is a decision both
    /// agreed to, citing both turns. A commitment read from the proposal's
    /// own words gives way to it.
    pub(super) fn fold_assent(
        &mut self,
        p: Proposal,
        seq: u64,
        speaker: &str,
        sentences: &[Classified<'_>],
    ) {
        let texts: Vec<&str> = sentences.iter().map(|c| c.text).collect();
        if p.speaker == speaker
            || p.conv_index + 1 != self.conv_index
            || !rules::opens_with_assent(&texts)
            || !rules::is_listed(rules::Act::Decision, &p.text)
        {
            return;
        }
        let Some(id) = self.add_decision(p.seq, &p.speaker, &p.text, None, true) else {
            return;
        };
        if let Some(item) = self.decisions.iter_mut().find(|d| d.id == id) {
            let d = &mut item.decision;
            if !d.agreed_by.iter().any(|a| a == speaker)
                && d.evidence_seqs.len() < MAX_EVIDENCE_SEQS
            {
                d.agreed_by.push(speaker.to_string());
                push_seq(&mut d.evidence_seqs, seq);
            }
        }
        self.remove_actions(|a| {
            a.evidence_seqs.first() == Some(&p.seq) && p.text.contains(a.action.as_str())
        });
    }

    /// Removes the actions `drop` picks, with their retry marks (the two
    /// lists are kept in step).
    pub(super) fn remove_actions(&mut self, drop: impl Fn(&PendingAction) -> bool) {
        let mut i = 0;
        while i < self.actions.len() {
            if drop(&self.actions[i]) {
                self.remove_action(i);
            } else {
                i += 1;
            }
        }
    }

    /// Removes action `i` and its retry mark.
    fn remove_action(&mut self, i: usize) {
        self.actions.remove(i);
        if i < self.action_retries.len() {
            self.action_retries.remove(i);
        }
    }

    /// "Agreed", "+1" right after a decision adds the speaker to it, and
    /// settles a recent reversal that someone else disputed.
    pub(super) fn fold_agreement(&mut self, seq: u64, speaker: &str, sentences: &[Classified<'_>]) {
        if !sentences.iter().any(|c| c.cues.agreement) {
            return;
        }
        let now = self.conv_index;
        if let Some(recent) = &mut self.recent_decision {
            if now - recent.conv_index <= AGREEMENT_WINDOW {
                recent.conv_index = now;
                let id = recent.id;
                if let Some(item) = self.decisions.iter_mut().find(|d| d.id == id) {
                    if !item.decision.agreed_by.iter().any(|a| a == speaker)
                        && item.decision.evidence_seqs.len() < MAX_EVIDENCE_SEQS
                    {
                        item.decision.agreed_by.push(speaker.to_string());
                        push_seq(&mut item.decision.evidence_seqs, seq);
                    }
                }
            }
        }
        for c in &mut self.conflicts {
            if now - c.conv_index <= AGREEMENT_WINDOW {
                c.conv_index = now;
            }
        }
        self.conflicts
            .retain(|c| !(c.reverser != speaker && c.conv_index == now));
    }

    // -- actions -----------------------------------------------------------------

    pub(super) fn add_action(&mut self, a: PendingAction, retry_of: Option<String>) {
        // The same commitment restated (same owner) merges into the open one.
        if let Some(existing) = self.actions.iter_mut().find(|x| {
            x.status != ActionStatus::Done
                && x.owner == a.owner
                && rules::is_near_duplicate(&a.action, &x.action)
        }) {
            // Its origin only: the owner is already the speaker of (or
            // named in) a turn the existing item cites.
            if let Some(&s) = a.evidence_seqs.first() {
                push_seq(&mut existing.evidence_seqs, s);
            }
            if existing.deadline.is_empty() {
                existing.deadline = a.deadline;
            }
            return;
        }
        if self.actions.len() >= MAX_ACTIONS {
            match self
                .actions
                .iter()
                .position(|x| x.status == ActionStatus::Done)
            {
                Some(i) => {
                    self.remove_action(i);
                    self.drop_item("done pending_actions");
                }
                None => {
                    self.drop_item("pending_actions");
                    return;
                }
            }
        }
        self.actions.push(a);
        // Kept aligned with `actions` (a state from before this field
        // existed deserializes it empty: pad it).
        self.action_retries.resize(self.actions.len() - 1, None);
        self.action_retries.push(retry_of);
    }

    /// A completion statement marks DONE the open action it talks about
    /// (two shared words, or half of the action's words), else — for "done"
    /// and the like, not for a customer's "resolved" — the speaker's own
    /// latest open action.
    pub(super) fn complete_by_statement(
        &mut self,
        seq: u64,
        speaker: &str,
        words: &BTreeSet<String>,
        by_worker: bool,
    ) {
        let mut best: Option<(usize, usize)> = None; // (shared, index)
        for (i, a) in self.actions.iter().enumerate() {
            if a.status == ActionStatus::Done || a.evidence_seqs.first() == Some(&seq) {
                continue;
            }
            let aw = rules::content_words(&a.action);
            let shared = aw.intersection(words).count();
            let enough = shared >= 2 || shared >= 1 && shared * 2 >= aw.len();
            if enough && best.is_none_or(|(b, _)| shared >= b) {
                best = Some((shared, i));
            }
        }
        // "Done." completes the speaker's own latest action, and so does a
        // report right after the turn that asked for it; a later report
        // that names something else ("Added the trip to your calendar")
        // does not complete an unrelated, older one.
        let bare = words.len() < 3;
        let previous = self.prev_conv.as_ref().map_or(0, |(s, _)| *s);
        let index = best.map(|(_, i)| i).or_else(|| {
            by_worker
                .then(|| {
                    self.actions.iter().rposition(|a| {
                        a.status != ActionStatus::Done
                            && a.owner == speaker
                            && a.evidence_seqs.first() != Some(&seq)
                            && (bare || a.evidence_seqs.first() >= Some(&previous))
                    })
                })
                .flatten()
        });
        // Else the latest open action it shares a word with ("Approval
        // REQ0087731 approved" after "I'll request the approval").
        let index = index.or_else(|| {
            self.actions.iter().rposition(|a| {
                a.status != ActionStatus::Done
                    && a.evidence_seqs.first() != Some(&seq)
                    && rules::content_words(&a.action)
                        .intersection(words)
                        .next()
                        .is_some()
            })
        });
        if let Some(i) = index {
            let a = &mut self.actions[i];
            a.status = ActionStatus::Done;
            push_seq(&mut a.evidence_seqs, seq);
        }
    }

    // -- facts -------------------------------------------------------------------

    pub(super) fn fold_facts(&mut self, seq: u64, speaker: &str, sentences: &[Classified<'_>]) {
        for s in sentences.iter().map(|c| c.text) {
            if rules::has_fact_entity(s) {
                self.add_fact(KeyFact {
                    fact: rules::item_text(s),
                    stated_by: speaker.to_string(),
                    evidence_seqs: vec![seq],
                });
            }
        }
    }

    /// Keeps a fact unless an earlier one repeats it: near-duplicate words
    /// and no identifier the earlier fact lacks.
    pub(super) fn add_fact(&mut self, f: KeyFact) {
        if self.facts.len() >= MAX_FACTS {
            self.drop_item("key_facts");
            return;
        }
        let ents: BTreeSet<&str> = rules::entities(&f.fact)
            .into_iter()
            .map(|e| e.text)
            .collect();
        // Cheap containment first: only facts holding all of the new one's
        // identifiers can repeat it, and few do.
        let repeated = self.facts.iter().any(|old| {
            ents.iter().all(|e| old.fact.contains(e)) && {
                let old_ents: BTreeSet<&str> = rules::entities(&old.fact)
                    .into_iter()
                    .map(|e| e.text)
                    .collect();
                ents.is_subset(&old_ents) && rules::is_near_duplicate(&f.fact, &old.fact)
            }
        });
        if !repeated {
            self.facts.push(f);
        }
    }

    pub(super) fn drop_item(&mut self, section: &str) {
        *self.dropped.entry(section.to_string()).or_default() += 1;
    }
}
