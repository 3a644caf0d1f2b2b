//! Handlers and conversions of long-term memory: facts, episodes, pending
//! actions that carry over, and search. `api/mod.rs` routes the RPCs here.

use tonic::Status;

use super::convert::{self, timestamp};
use super::non_empty;
use crate::error::{Error, Result};
use crate::memory::episodes::{ActionRef, CarriedAction, Episode};
use crate::memory::facts::{Fact, FactFilter, FactOrigin, FactSource, NewFact, PutOutcome};
use crate::memory::{Memory, ReadAfter};
use crate::model::{ActionStatus, Outcome};
use crate::pb;
use crate::search::{Hit, Kind, SearchQuery, DEFAULT_LIMIT};

impl From<Fact> for pb::Fact {
    fn from(f: Fact) -> Self {
        pb::Fact {
            namespace: f.namespace,
            fact_id: f.fact_id,
            subject_id: f.subject_id,
            key: f.key,
            text: f.text,
            sources: f
                .sources
                .into_iter()
                .map(|s| pb::FactSource {
                    session_id: s.session_id,
                    seq: s.seq,
                    // Read from the sessions' retention marks by GetFact
                    // and ListFacts (`with_removed_turns`).
                    turn_removed: false,
                })
                .collect(),
            tags: f.tags,
            origin: match f.origin {
                FactOrigin::Client => pb::FactOrigin::Client,
                FactOrigin::Extracted => pb::FactOrigin::Extracted,
            } as i32,
            supersedes: f.supersedes,
            superseded_by: f.superseded_by,
            create_time: Some(timestamp(f.created_at)),
            update_time: Some(timestamp(f.updated_at)),
        }
    }
}

/// The proto form of a summary outcome.
pub fn outcome(o: Outcome) -> pb::Outcome {
    match o {
        Outcome::InProgress => pb::Outcome::InProgress,
        Outcome::Resolved => pb::Outcome::Resolved,
        Outcome::UnresolvedFollowUp => pb::Outcome::UnresolvedFollowUp,
        Outcome::Completed => pb::Outcome::Completed,
    }
}

impl From<Episode> for pb::Episode {
    fn from(e: Episode) -> Self {
        pb::Episode {
            namespace: e.namespace,
            episode_id: e.session_id.clone(),
            subject_id: e.subject_id,
            session_id: e.session_id,
            start_time: Some(timestamp(e.started_at)),
            end_time: Some(timestamp(e.ended_at)),
            topic: e.topic,
            outcome: outcome(e.outcome) as i32,
            prose: e.prose,
            user_intent: e.user_intent,
            decisions: e.decisions.into_iter().map(Into::into).collect(),
            pending_actions: e.pending_actions.into_iter().map(Into::into).collect(),
            summary_version: e.summary_version,
            last_seq: e.last_seq,
            ended_as: convert::state(e.ended_as) as i32,
            turns_removed: None,
        }
    }
}

impl From<CarriedAction> for pb::CarriedAction {
    fn from(c: CarriedAction) -> Self {
        pb::CarriedAction {
            r#ref: Some(pb::PendingActionRef {
                session_id: c.action_ref.session_id,
                action_seq: c.action_ref.action_seq,
            }),
            action: Some(c.action.into()),
        }
    }
}

fn kind(k: Kind) -> pb::SearchKind {
    match k {
        Kind::Turn => pb::SearchKind::Turn,
        Kind::Fact => pb::SearchKind::Fact,
        Kind::Episode => pb::SearchKind::Episode,
    }
}

impl From<Hit> for pb::SearchHit {
    fn from(h: Hit) -> Self {
        pb::SearchHit {
            kind: kind(h.kind) as i32,
            score: h.score,
            snippet: h.snippet,
            subject_id: h.subject_id,
            episode_id: if h.kind == Kind::Episode {
                h.session_id.clone()
            } else {
                String::new()
            },
            session_id: h.session_id,
            seq: h.seq,
            fact_id: h.fact_id,
            role: h.role.map_or(pb::Role::Unspecified, convert::role) as i32,
        }
    }
}

fn action_status(v: i32) -> Result<ActionStatus> {
    match pb::ActionStatus::try_from(v) {
        Ok(pb::ActionStatus::Pending) => Ok(ActionStatus::Pending),
        Ok(pb::ActionStatus::InProgress) => Ok(ActionStatus::InProgress),
        Ok(pb::ActionStatus::Done) => Ok(ActionStatus::Done),
        _ => Err(Error::invalid(format!(
            "status {v} must be ACTION_STATUS_PENDING, ACTION_STATUS_IN_PROGRESS or ACTION_STATUS_DONE"
        ))),
    }
}

fn kinds(v: &[i32]) -> Result<Vec<Kind>> {
    v.iter()
        .map(|&k| match pb::SearchKind::try_from(k) {
            Ok(pb::SearchKind::Turn) => Ok(Kind::Turn),
            Ok(pb::SearchKind::Fact) => Ok(Kind::Fact),
            Ok(pb::SearchKind::Episode) => Ok(Kind::Episode),
            _ => Err(Error::invalid(format!(
                "kinds holds {k}; use SEARCH_KIND_TURN, SEARCH_KIND_FACT or SEARCH_KIND_EPISODE"
            ))),
        })
        .collect()
}

/// PutFact.
pub async fn put_fact(m: &Memory, r: pb::PutFactRequest) -> Result<pb::PutFactResponse, Status> {
    {
        let new = NewFact {
            namespace: r.namespace,
            subject_id: r.subject_id,
            key: r.key,
            text: r.text,
            source: r.source.map(|s| FactSource {
                session_id: s.session_id,
                seq: s.seq,
            }),
            tags: r.tags,
            origin: FactOrigin::Client,
        };
        let (fact, out) = m.put_fact(new).await?;
        let (outcome, superseded) = match out {
            PutOutcome::Created => (pb::PutFactOutcome::Created, None),
            PutOutcome::Superseded(old) => (pb::PutFactOutcome::Superseded, Some((*old).into())),
            PutOutcome::Merged | PutOutcome::KeptClientFact => (pb::PutFactOutcome::Merged, None),
        };
        Ok(pb::PutFactResponse {
            fact: Some(fact.into()),
            outcome: outcome as i32,
            superseded,
        })
    }
}

/// Facts of namespace `ns` in their proto form, each source that cites a
/// turn a retention policy removed marked so: one retention mark read per
/// distinct session the facts cite.
async fn with_removed_turns(
    m: &Memory,
    ns: &str,
    facts: Vec<Fact>,
) -> Result<Vec<pb::Fact>, Status> {
    let cited: std::collections::BTreeSet<&str> = facts
        .iter()
        .flat_map(|f| f.sources.iter().map(|s| s.session_id.as_str()))
        .collect();
    let ids: Vec<String> = cited.into_iter().map(str::to_owned).collect();
    let marks = m.sessions_turns_removed(ns, ids.clone()).await?;
    let removed: std::collections::HashMap<String, u64> = ids
        .into_iter()
        .zip(marks)
        .filter_map(|(id, mark)| Some((id, mark?.through_seq)))
        .collect();
    Ok(facts
        .into_iter()
        .map(|f| {
            let mut p = pb::Fact::from(f);
            for s in &mut p.sources {
                s.turn_removed =
                    s.seq > 0 && removed.get(&s.session_id).is_some_and(|&t| s.seq <= t);
            }
            p
        })
        .collect())
}

/// GetFact.
pub async fn get_fact(m: &Memory, r: pb::GetFactRequest) -> Result<pb::GetFactResponse, Status> {
    let fact = m.get_fact(&r.namespace, &r.fact_id).await?;
    Ok(pb::GetFactResponse {
        fact: with_removed_turns(m, &r.namespace, vec![fact]).await?.pop(),
    })
}

/// ListFacts.
pub async fn list_facts(
    m: &Memory,
    r: pb::ListFactsRequest,
) -> Result<pb::ListFactsResponse, Status> {
    let filter = FactFilter {
        subject_id: non_empty(r.subject_id),
        tag: non_empty(r.tag),
        key: non_empty(r.key),
        include_history: r.include_history,
    };
    let page = m
        .list_facts(&r.namespace, filter, r.page_size, &r.page_token)
        .await?;
    Ok(pb::ListFactsResponse {
        facts: with_removed_turns(m, &r.namespace, page.items).await?,
        next_page_token: page.next_page_token.unwrap_or_default(),
    })
}

/// DeleteFact.
pub async fn delete_fact(
    m: &Memory,
    r: pb::DeleteFactRequest,
) -> Result<pb::DeleteFactResponse, Status> {
    let fact = m.delete_fact(&r.namespace, &r.fact_id).await?;
    Ok(pb::DeleteFactResponse {
        fact: Some(fact.into()),
    })
}

/// ListEpisodes.
pub async fn list_episodes(
    m: &Memory,
    r: pb::ListEpisodesRequest,
) -> Result<pb::ListEpisodesResponse, Status> {
    let page = m
        .list_episodes(&r.namespace, &r.subject_id, r.page_size, &r.page_token)
        .await?;
    // An episode whose session lost turns to retention says so.
    let removed = m
        .sessions_turns_removed(
            &r.namespace,
            page.items.iter().map(|e| e.session_id.clone()).collect(),
        )
        .await?;
    Ok(pb::ListEpisodesResponse {
        episodes: page
            .items
            .into_iter()
            .zip(removed)
            .map(|(e, removed)| pb::Episode {
                turns_removed: removed.map(Into::into),
                ..e.into()
            })
            .collect(),
        next_page_token: page.next_page_token.unwrap_or_default(),
    })
}

/// UpdatePendingAction.
pub async fn update_pending_action(
    m: &Memory,
    r: pb::UpdatePendingActionRequest,
) -> Result<pb::UpdatePendingActionResponse, Status> {
    {
        let a = r
            .r#ref
            .ok_or_else(|| Error::invalid("ref is required: the session id and action_seq"))?;
        let status = action_status(r.status)?;
        let action = m
            .update_pending_action(
                &r.namespace,
                ActionRef {
                    session_id: a.session_id,
                    action_seq: a.action_seq,
                },
                status,
            )
            .await?;
        Ok(pb::UpdatePendingActionResponse {
            action: Some(action.into()),
        })
    }
}

/// Search.
pub async fn search(
    m: &Memory,
    r: pb::SearchRequest,
    after: ReadAfter,
) -> Result<pb::SearchResponse, Status> {
    let q = SearchQuery {
        kinds: kinds(&r.kinds)?,
        namespace: r.namespace,
        subject_id: non_empty(r.subject_id),
        session_id: non_empty(r.session_id),
        query: r.query,
        limit: match r.limit {
            0 => DEFAULT_LIMIT,
            n => n,
        } as usize,
        // Dates in the query ("last May") are relative to now.
        reference_time: None,
        snippets: true,
        phrases: true,
    };
    let (hits, lag) = m.search_after(q, after).await?;
    Ok(pb::SearchResponse {
        hits: hits.into_iter().map(Into::into).collect(),
        index_lag: lag,
    })
}
