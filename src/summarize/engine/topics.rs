//! Topic segmentation: lexical cohesion over a window of substantive turns.
//! Part of the fold: no I/O, no clock.

use super::*;

/// One word of a topic's vocabulary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct WordStat {
    pub(super) count: u64,
    pub(super) first: u64,
    pub(super) surface: String,
}

/// What one turn brings to topic segmentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct TopicTurn {
    pub(super) seq: u64,
    /// (stem, surface) content words without digits.
    pub(super) words: Vec<(String, String)>,
    pub(super) key_point: Option<String>,
}

impl TopicTurn {
    pub(super) fn substantive(&self) -> bool {
        self.words.len() >= MIN_TOPIC_WORDS
    }

    pub(super) fn stems(&self) -> BTreeSet<String> {
        self.words.iter().map(|(s, _)| s.clone()).collect()
    }
}

/// The topic segment still growing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct OpenTopic {
    pub(super) first_seq: u64,
    pub(super) last_seq: u64,
    pub(super) substantive: u32,
    pub(super) key_points: Vec<(String, u64)>,
    pub(super) vocabulary: BTreeMap<String, WordStat>,
    pub(super) next_word: u64,
    /// Stems of the last substantive turns, for cohesion.
    pub(super) window: VecDeque<Vec<String>>,
    /// Turns since a possible topic shift, not yet assigned.
    pub(super) candidate: Vec<TopicTurn>,
    /// Key points or words dropped at the bounds.
    pub(super) dropped_key_points: u64,
}

impl OpenTopic {
    pub(super) fn new(first_seq: u64) -> OpenTopic {
        OpenTopic {
            first_seq,
            last_seq: first_seq,
            substantive: 0,
            key_points: Vec::new(),
            vocabulary: BTreeMap::new(),
            next_word: 0,
            window: VecDeque::new(),
            candidate: Vec::new(),
            dropped_key_points: 0,
        }
    }

    pub(super) fn window_words(&self) -> BTreeSet<String> {
        self.window.iter().flatten().cloned().collect()
    }

    pub(super) fn absorb(&mut self, t: TopicTurn) {
        self.last_seq = t.seq;
        if t.substantive() {
            self.substantive += 1;
            self.window
                .push_back(t.words.iter().map(|(s, _)| s.clone()).collect());
            if self.window.len() > TOPIC_WINDOW {
                self.window.pop_front();
            }
        }
        for (stem, surface) in t.words {
            if let Some(w) = self.vocabulary.get_mut(&stem) {
                w.count += 1;
            } else if self.vocabulary.len() < MAX_TOPIC_WORDS {
                self.vocabulary.insert(
                    stem,
                    WordStat {
                        count: 1,
                        first: self.next_word,
                        surface,
                    },
                );
                self.next_word += 1;
            }
        }
        if let Some(kp) = t.key_point {
            let dup = self
                .key_points
                .iter()
                .any(|(k, _)| rules::is_near_duplicate(&kp, k));
            if dup {
                // A repeated point adds nothing.
            } else if self.key_points.len() < MAX_KEY_POINTS_PER_TOPIC {
                self.key_points.push((kp, t.seq));
            } else {
                self.dropped_key_points += 1;
            }
        }
    }

    pub(super) fn label(&self) -> String {
        let mut ranked: Vec<&WordStat> = self.vocabulary.values().collect();
        ranked.sort_by(|a, b| b.count.cmp(&a.count).then(a.first.cmp(&b.first)));
        // A topic is a content phrase the participants discussed, never
        // a filler, an interjection or a number word ("buttons, twelve,
        // hmm"; "keep, woohoo, congrats").
        let top: Vec<&str> = ranked
            .iter()
            .filter(|w| rules::is_topic_word(&w.surface.to_lowercase()))
            .take(TOPIC_LABEL_WORDS)
            .map(|w| w.surface.as_str())
            .collect();
        if top.is_empty() {
            self.key_points
                .first()
                .map(|(k, _)| rules::clip(k, 80))
                .unwrap_or_default()
        } else {
            top.join(", ")
        }
    }

    pub(super) fn segment(&self) -> TopicSegment {
        let mut evidence: Vec<u64> = self.key_points.iter().map(|(_, s)| *s).collect();
        evidence.sort_unstable();
        evidence.dedup();
        TopicSegment {
            first_seq: self.first_seq,
            last_seq: self.last_seq,
            topic: self.label(),
            key_points: self.key_points.iter().map(|(k, _)| k.clone()).collect(),
            evidence_seqs: evidence,
        }
    }
}

impl FoldState {
    /// Lexical cohesion: a substantive turn sharing under 15% of its words
    /// with the last few turns of a topic (of at least three substantive
    /// turns) may start a new topic. The shift is confirmed when the next
    /// substantive turn shares at least as many words with the new turns as
    /// with the old topic; otherwise the turns go back to the old topic.
    pub(super) fn fold_topic(&mut self, t: TopicTurn) {
        let Some(open) = &mut self.open_topic else {
            let mut open = OpenTopic::new(t.seq);
            open.absorb(t);
            self.open_topic = Some(open);
            return;
        };
        if !t.substantive() {
            if open.candidate.is_empty() {
                open.absorb(t);
            } else {
                open.candidate.push(t);
            }
            return;
        }
        let stems = t.stems();
        if !open.candidate.is_empty() {
            let new_words: BTreeSet<String> =
                open.candidate.iter().flat_map(TopicTurn::stems).collect();
            let s_new = stems.intersection(&new_words).count();
            let s_old = stems.intersection(&open.window_words()).count();
            let candidate = std::mem::take(&mut open.candidate);
            if s_new >= s_old {
                let mut next = OpenTopic::new(candidate[0].seq);
                for c in candidate {
                    next.absorb(c);
                }
                next.absorb(t);
                if let Some(closed) = self.open_topic.replace(next) {
                    self.close_topic(&closed);
                }
            } else {
                for c in candidate {
                    open.absorb(c);
                }
                open.absorb(t);
            }
            return;
        }
        let cohesion = rules::overlap(&stems, &open.window_words());
        if open.substantive >= MIN_TOPIC_TURNS && cohesion < TOPIC_SHIFT_COHESION {
            open.candidate.push(t);
        } else {
            open.absorb(t);
        }
    }

    pub(super) fn close_topic(&mut self, closed: &OpenTopic) {
        if closed.dropped_key_points > 0 {
            *self
                .dropped
                .entry("topic key_points".to_string())
                .or_default() += closed.dropped_key_points;
        }
        self.topics.push(closed.segment());
        self.topic_weights.push(closed.substantive);
    }
}

pub(super) fn topic_turn(
    seq: u64,
    conversational: bool,
    sentences: &[Classified<'_>],
) -> TopicTurn {
    if !conversational {
        return TopicTurn {
            seq,
            words: Vec::new(),
            key_point: None,
        };
    }
    let mut words: Vec<(String, String)> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for c in sentences {
        // Markers ("<unintelligible/>", "{vocalsound}") name no topic.
        for w in rules::words(&rules::strip_markers(c.text)) {
            if rules::is_stopword(&w)
                || w.chars().count() < 3
                || w.chars().any(|c| c.is_ascii_digit())
            {
                continue;
            }
            let s = rules::stem(&w);
            if seen.insert(s.clone()) {
                words.push((s, w));
            }
        }
    }
    let mut best: Option<&Classified<'_>> = None;
    for c in sentences {
        if c.importance >= rules::KEY_POINT_IMPORTANCE
            && !c.cues.filler
            && best.is_none_or(|b| c.importance > b.importance)
        {
            best = Some(c);
        }
    }
    let key_point = best.map(|c| rules::item_text(c.text));
    TopicTurn {
        seq,
        words,
        key_point,
    }
}
