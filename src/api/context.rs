//! Conversions for context bundles, handoffs and watch events.

use super::convert::{self, encoding_from};
use super::summaries::trigger;
use crate::bundle::{
    Bundle, BundleRequest, CompressedTurn, Layout, ManifestEntry, Recalled, RecalledItem,
    RecalledRef, Section, SeqRange,
};
use crate::error::Result;
use crate::memory::{HandoffOutcome, HandoffRequest};
use crate::model::Encoding;
use crate::pb;
use crate::runtime::watch::WatchEvent;

/// A bundle request from its message.
pub fn bundle_request(r: &pb::GetContextBundleRequest) -> Result<BundleRequest> {
    Ok(BundleRequest {
        budget_tokens: r.budget_tokens,
        encoding: encoding_from(r.encoding, "encoding")?,
        query: r.query.clone(),
        agent_id: r.agent_id.clone(),
        recent_interactions: r.recent_interactions,
        max_bytes: 0,
        skip_recall: r.skip_recall,
    })
}

/// A handoff request from its message.
pub fn handoff_request(r: pb::HandoffRequest) -> HandoffRequest {
    HandoffRequest {
        from_agent: r.from_agent,
        to_agent: r.to_agent,
        reason: r.reason,
        lease_epoch: r.lease_epoch,
        budget_tokens: r.budget_tokens,
        idempotency_key: (!r.idempotency_key.is_empty()).then_some(r.idempotency_key),
    }
}

fn section(s: Section) -> pb::BundleSection {
    match s {
        Section::Header => pb::BundleSection::Header,
        Section::PendingActions => pb::BundleSection::PendingActions,
        Section::CarriedActions => pb::BundleSection::CarriedActions,
        Section::Facts => pb::BundleSection::Facts,
        Section::Episodes => pb::BundleSection::Episodes,
        Section::OpenQuestions => pb::BundleSection::OpenQuestions,
        Section::Decisions => pb::BundleSection::Decisions,
        Section::Summary => pb::BundleSection::Summary,
        Section::KeyFacts => pb::BundleSection::KeyFacts,
        Section::RecentTurns => pb::BundleSection::RecentTurns,
        Section::EarlierTurns => pb::BundleSection::EarlierTurns,
        Section::Recalled => pb::BundleSection::Recalled,
    }
}

fn ranges(v: Vec<SeqRange>) -> Vec<pb::SeqRange> {
    v.into_iter()
        .map(|(first_seq, last_seq)| pb::SeqRange {
            first_seq,
            last_seq,
        })
        .collect()
}

impl From<ManifestEntry> for pb::ManifestEntry {
    fn from(e: ManifestEntry) -> Self {
        pb::ManifestEntry {
            section: section(e.section) as i32,
            available: e.available,
            included: e.included,
            shortened: e.shortened,
            omitted: e.omitted,
            included_seqs: ranges(e.included_seqs),
            shortened_seqs: ranges(e.shortened_seqs),
            omitted_seqs: ranges(e.omitted_seqs),
            tokens: e.tokens,
        }
    }
}

impl From<CompressedTurn> for pb::CompressedTurn {
    fn from(t: CompressedTurn) -> Self {
        pb::CompressedTurn {
            seq: t.seq,
            role: convert::role(t.role) as i32,
            speaker: t.speaker,
            text: t.text,
            shortened: t.shortened,
        }
    }
}

impl From<RecalledRef> for pb::RecalledRef {
    fn from(r: RecalledRef) -> Self {
        pb::RecalledRef {
            session_id: r.session_id,
            seq: r.seq,
            fact_id: r.fact_id,
            rank: r.rank,
        }
    }
}

impl From<Recalled> for pb::RecalledMemory {
    fn from(r: Recalled) -> Self {
        let mut m = pb::RecalledMemory {
            rank: r.rank,
            ..Default::default()
        };
        match r.item {
            RecalledItem::Turns {
                session_id,
                hit_seq,
                turns,
            } => {
                m.session_id = session_id;
                m.hit_seq = hit_seq;
                m.turns = turns.into_iter().map(Into::into).collect();
            }
            RecalledItem::Fact(f) => m.fact = Some(f.into()),
            RecalledItem::Episode(e) => {
                m.session_id = e.session_id.clone();
                m.episode = Some(e.into());
            }
        }
        m
    }
}

impl From<Bundle> for pb::ContextBundle {
    fn from(b: Bundle) -> Self {
        let s = b.session;
        pb::ContextBundle {
            namespace: s.namespace,
            session_id: s.session_id,
            subject_id: s.subject_id,
            state: convert::state(s.state) as i32,
            owner_agent: s.owner_agent,
            lease_epoch: s.lease_epoch,
            as_of_seq: b.as_of_seq,
            encoding: match b.encoding {
                Encoding::Cl100kBase => pb::Encoding::Cl100kBase,
                Encoding::O200kBase => pb::Encoding::O200kBase,
            } as i32,
            budget_tokens: b.budget_tokens,
            token_count: b.token_count,
            rendered_text: b.rendered_text,
            user_intent: b.user_intent,
            prose: b.prose,
            pending_actions: b.pending_actions.into_iter().map(Into::into).collect(),
            open_questions: b.open_questions.into_iter().map(Into::into).collect(),
            decisions: b.decisions.into_iter().map(Into::into).collect(),
            key_facts: b.key_facts.into_iter().map(Into::into).collect(),
            recent_turns: b.recent_turns.into_iter().map(Into::into).collect(),
            earlier_turns: b.earlier_turns.into_iter().map(Into::into).collect(),
            carried_actions: b.carried_actions.into_iter().map(Into::into).collect(),
            facts: b.facts.into_iter().map(Into::into).collect(),
            episodes: b.episodes.into_iter().map(Into::into).collect(),
            recalled: b.recalled.into_iter().map(Into::into).collect(),
            stable_end_tokens: b.stable_end.tokens,
            stable_end_bytes: b.stable_end.bytes,
            log_end_tokens: b.log_end.tokens,
            log_end_bytes: b.log_end.bytes,
            manifest: Some(pb::BundleManifest {
                sections: b.manifest.sections.into_iter().map(Into::into).collect(),
                summary_version: b.manifest.summary_version,
                summarized: b
                    .manifest
                    .summarized
                    .map(|(first_seq, last_seq)| pb::SeqRange {
                        first_seq,
                        last_seq,
                    }),
                complete: b.manifest.complete,
                recalled_left_out: b
                    .manifest
                    .recalled_left_out
                    .into_iter()
                    .map(Into::into)
                    .collect(),
                transcript: b.manifest.transcript,
                turns_removed: b.manifest.turns_removed.map(Into::into),
                layout: match b.manifest.layout {
                    Layout::State => pb::BundleLayout::State,
                    Layout::Request => pb::BundleLayout::Request,
                } as i32,
            }),
        }
    }
}

impl From<HandoffOutcome> for pb::HandoffResponse {
    fn from(h: HandoffOutcome) -> Self {
        pb::HandoffResponse {
            lease_epoch: h.lease_epoch,
            session: Some(h.session.into()),
            event_seq: h.event_seq,
            replayed: h.replayed,
            summary: h.summary.map(Into::into),
            bundle: Some(h.bundle.into()),
        }
    }
}

impl From<WatchEvent> for pb::WatchSessionResponse {
    fn from(e: WatchEvent) -> Self {
        use pb::watch_session_response::Event;
        let event = match e {
            WatchEvent::Turn(t) => Event::Turn((*t).into()),
            WatchEvent::Summary(s) => Event::SummaryWritten(pb::SummaryWritten {
                version: s.version,
                covers_through_seq: s.covers_through_seq,
                trigger: trigger(s.trigger) as i32,
            }),
            WatchEvent::Handoff(h) => Event::Handoff(pb::HandoffEvent {
                from_agent: h.from_agent,
                to_agent: h.to_agent,
                reason: h.reason,
                lease_epoch: h.lease_epoch,
                seq: h.seq,
            }),
            WatchEvent::State { state, at_seq } => Event::StateChanged(pb::StateChanged {
                state: convert::state(state) as i32,
                at_seq,
            }),
        };
        pb::WatchSessionResponse { event: Some(event) }
    }
}
