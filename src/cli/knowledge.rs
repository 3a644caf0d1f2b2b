//! CLI commands of long-term memory: `fact put|list|show|delete`,
//! `episodes`, `action`, `search`, and the offline `reindex`.

use clap::{Subcommand, ValueEnum};

use super::{connect, status_line, ClientArgs};
use crate::config::Overrides;
use crate::memory::knowledge::StoredDocuments;
use crate::pb;
use crate::search::SearchIndex;

/// `mnemo fact ...`.
#[derive(Debug, Subcommand)]
pub enum FactCommand {
    /// Store a fact about a subject (a fact with the key of a current fact
    /// supersedes it).
    Put {
        /// Namespace.
        #[arg(long, short)]
        namespace: String,
        /// Subject the fact is about.
        #[arg(long)]
        subject: String,
        /// Optional key, e.g. preferred_language.
        #[arg(long, default_value = "")]
        key: String,
        /// Tags (repeat the flag).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// The fact.
        text: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List a subject's (or a namespace's) current facts.
    List {
        /// Namespace.
        #[arg(long, short)]
        namespace: String,
        /// Only this subject.
        #[arg(long, default_value = "")]
        subject: String,
        /// Only this tag.
        #[arg(long, default_value = "")]
        tag: String,
        /// Superseded versions too.
        #[arg(long)]
        history: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Delete one fact version.
    Delete {
        /// Namespace.
        #[arg(long, short)]
        namespace: String,
        /// The fact id.
        fact_id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// What `mnemo search` may return.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KindArg {
    /// Turns.
    Turn,
    /// Current facts.
    Fact,
    /// Episodes.
    Episode,
}

/// Arguments of `mnemo search`.
#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// Namespace.
    #[arg(long, short)]
    namespace: String,
    /// Only this subject.
    #[arg(long, default_value = "")]
    subject: String,
    /// Only this session.
    #[arg(long, default_value = "")]
    session: String,
    /// Only these kinds (repeat the flag).
    #[arg(long = "kind", value_enum)]
    kinds: Vec<KindArg>,
    /// Most hits (at most 100).
    #[arg(long, default_value_t = 10)]
    limit: u32,
    /// Words to look for.
    query: String,
    #[command(flatten)]
    client: ClientArgs,
}

/// A pending action's new status.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum StatusArg {
    /// Not started.
    Pending,
    /// Started.
    InProgress,
    /// Done: it stops carrying over to later sessions.
    Done,
}

/// Arguments of `mnemo action`.
#[derive(Debug, clap::Args)]
pub struct ActionArgs {
    /// Namespace.
    #[arg(long, short)]
    namespace: String,
    /// The session whose summary holds the action.
    #[arg(long, short)]
    session: String,
    /// The action's first evidence seq (the [#N] the bundle shows).
    #[arg(long)]
    seq: u64,
    /// The new status.
    #[arg(long, value_enum)]
    status: StatusArg,
    #[command(flatten)]
    client: ClientArgs,
}

/// Runs `mnemo action`.
pub async fn action(a: ActionArgs) -> Result<(), String> {
    let mut c = connect(&a.client).await?;
    let status = match a.status {
        StatusArg::Pending => pb::ActionStatus::Pending,
        StatusArg::InProgress => pb::ActionStatus::InProgress,
        StatusArg::Done => pb::ActionStatus::Done,
    };
    let r = c
        .update_pending_action(pb::UpdatePendingActionRequest {
            namespace: a.namespace,
            r#ref: Some(pb::PendingActionRef {
                session_id: a.session,
                action_seq: a.seq,
            }),
            status: status as i32,
        })
        .await
        .map_err(status_line)?
        .into_inner();
    let action = r.action.unwrap_or_default();
    let status = status
        .as_str_name()
        .trim_start_matches("ACTION_STATUS_")
        .to_lowercase();
    if a.client.json {
        let v = serde_json::json!({
            "status": status,
            "action": action.action,
            "owner": action.owner,
            "evidence_seqs": action.evidence_seqs,
        });
        println!("{v}");
    } else {
        println!("{status}: {}", action.action);
    }
    Ok(())
}

/// Arguments of `mnemo episodes`.
#[derive(Debug, clap::Args)]
pub struct EpisodesArgs {
    /// Namespace.
    #[arg(long, short)]
    namespace: String,
    /// The subject.
    #[arg(long)]
    subject: String,
    #[command(flatten)]
    client: ClientArgs,
}

fn kind_name(k: i32) -> String {
    let name = pb::SearchKind::try_from(k).map_or("?", |k| k.as_str_name());
    name.trim_start_matches("SEARCH_KIND_").to_lowercase()
}

fn fact_json(f: &pb::Fact) -> serde_json::Value {
    serde_json::json!({
        "fact_id": f.fact_id,
        "subject_id": f.subject_id,
        "key": f.key,
        "text": f.text,
        "tags": f.tags,
        "origin": pb::FactOrigin::try_from(f.origin).map_or("?", |o| o.as_str_name()),
        "sources": f.sources.iter().map(|s| serde_json::json!({"session_id": s.session_id, "seq": s.seq})).collect::<Vec<_>>(),
        "supersedes": f.supersedes,
        "superseded_by": f.superseded_by,
    })
}

fn print_fact(f: &pb::Fact) {
    let origin = if f.origin == pb::FactOrigin::Extracted as i32 {
        "extracted"
    } else {
        "client"
    };
    let state = if f.superseded_by.is_empty() {
        String::new()
    } else {
        format!("  superseded by {}", f.superseded_by)
    };
    let key = if f.key.is_empty() { "-" } else { &f.key };
    println!(
        "{}  {}  {key}  [{origin}]  {}{state}",
        f.fact_id, f.subject_id, f.text
    );
}

/// Runs `mnemo fact ...`.
pub async fn fact(cmd: FactCommand) -> Result<(), String> {
    match cmd {
        FactCommand::Put {
            namespace,
            subject,
            key,
            tags,
            text,
            client,
        } => {
            let mut c = connect(&client).await?;
            let r = c
                .put_fact(pb::PutFactRequest {
                    namespace,
                    subject_id: subject,
                    key,
                    text,
                    tags,
                    source: None,
                })
                .await
                .map_err(status_line)?
                .into_inner();
            let outcome = pb::PutFactOutcome::try_from(r.outcome)
                .map_or("?", |o| o.as_str_name())
                .trim_start_matches("PUT_FACT_OUTCOME_")
                .to_lowercase();
            let fact = r.fact.unwrap_or_default();
            if client.json {
                let v = serde_json::json!({
                    "outcome": outcome,
                    "fact": fact_json(&fact),
                    "superseded": r.superseded.as_ref().map(fact_json),
                });
                println!("{v}");
                return Ok(());
            }
            match r.superseded {
                Some(old) => println!("{} ({outcome} {})", fact.fact_id, old.fact_id),
                None => println!("{} ({outcome})", fact.fact_id),
            }
        }
        FactCommand::List {
            namespace,
            subject,
            tag,
            history,
            client,
        } => {
            let json = client.json;
            let mut c = connect(&client).await?;
            let mut token = String::new();
            loop {
                let page = c
                    .list_facts(pb::ListFactsRequest {
                        namespace: namespace.clone(),
                        subject_id: subject.clone(),
                        tag: tag.clone(),
                        include_history: history,
                        page_size: 1000,
                        page_token: token,
                        ..Default::default()
                    })
                    .await
                    .map_err(status_line)?
                    .into_inner();
                for f in &page.facts {
                    if json {
                        println!("{}", fact_json(f));
                    } else {
                        print_fact(f);
                    }
                }
                if page.next_page_token.is_empty() {
                    break;
                }
                token = page.next_page_token;
            }
        }
        FactCommand::Delete {
            namespace,
            fact_id,
            client,
        } => {
            let mut c = connect(&client).await?;
            let r = c
                .delete_fact(pb::DeleteFactRequest { namespace, fact_id })
                .await
                .map_err(status_line)?
                .into_inner();
            match r.fact {
                Some(f) if client.json => println!("{}", fact_json(&f)),
                _ => println!("deleted"),
            }
        }
    }
    Ok(())
}

/// Runs `mnemo search`.
pub async fn search(a: SearchArgs) -> Result<(), String> {
    let mut c = connect(&a.client).await?;
    let kinds = a
        .kinds
        .iter()
        .map(|k| match k {
            KindArg::Turn => pb::SearchKind::Turn,
            KindArg::Fact => pb::SearchKind::Fact,
            KindArg::Episode => pb::SearchKind::Episode,
        } as i32)
        .collect();
    let r = c
        .search(pb::SearchRequest {
            namespace: a.namespace,
            subject_id: a.subject,
            session_id: a.session,
            query: a.query,
            kinds,
            limit: a.limit,
        })
        .await
        .map_err(status_line)?
        .into_inner();
    for h in &r.hits {
        let at = match pb::SearchKind::try_from(h.kind) {
            Ok(pb::SearchKind::Turn) => format!("{} #{}", h.session_id, h.seq),
            Ok(pb::SearchKind::Fact) => h.fact_id.clone(),
            _ => h.episode_id.clone(),
        };
        if a.client.json {
            let v = serde_json::json!({
                "kind": kind_name(h.kind),
                "score": h.score,
                "subject_id": h.subject_id,
                "session_id": h.session_id,
                "seq": h.seq,
                "fact_id": h.fact_id,
                "episode_id": h.episode_id,
                "snippet": h.snippet,
            });
            println!("{v}");
        } else {
            println!(
                "{:>6.2}  {:<7}  {at}  {}",
                h.score,
                kind_name(h.kind),
                h.snippet.replace('\n', " ")
            );
        }
    }
    if r.index_lag > 0 {
        eprintln!("({} recent writes were not yet searchable)", r.index_lag);
    }
    Ok(())
}

/// Runs `mnemo episodes`.
pub async fn episodes(a: EpisodesArgs) -> Result<(), String> {
    let mut c = connect(&a.client).await?;
    let mut token = String::new();
    loop {
        let page = c
            .list_episodes(pb::ListEpisodesRequest {
                namespace: a.namespace.clone(),
                subject_id: a.subject.clone(),
                page_size: 100,
                page_token: token,
            })
            .await
            .map_err(status_line)?
            .into_inner();
        for e in &page.episodes {
            let ended = e.end_time.map_or(0, |t| t.seconds);
            if a.client.json {
                let v = serde_json::json!({
                    "episode_id": e.episode_id,
                    "session_id": e.session_id,
                    "end_unix_seconds": ended,
                    "topic": e.topic,
                    "prose": e.prose,
                    "pending_actions": e.pending_actions.iter().map(|p| serde_json::json!({"action": p.action, "action_seq": p.evidence_seqs.first().copied().unwrap_or(0)})).collect::<Vec<_>>(),
                });
                println!("{v}");
            } else {
                println!("{}  {}  {}", e.session_id, e.topic, e.prose);
                for p in &e.pending_actions {
                    println!(
                        "    pending [#{}] {}",
                        p.evidence_seqs.first().copied().unwrap_or(0),
                        p.action
                    );
                }
            }
        }
        if page.next_page_token.is_empty() {
            return Ok(());
        }
        token = page.next_page_token;
    }
}

/// Runs `mnemo reindex`: rebuilds the search index of a stopped daemon's
/// data directory from its store.
pub fn reindex(overrides: &Overrides) -> Result<(), String> {
    let (opened, data_dir) = super::admin::open_store(overrides)?;
    let consumer = opened.search_consumer(&data_dir)?;
    let store = opened.store();
    let dir = data_dir.join(crate::server::SEARCH_INDEX_DIR);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
    }
    let (index, _) = SearchIndex::open(Some(&dir)).map_err(|e| e.to_string())?;
    let started = std::time::Instant::now();
    let docs = index
        .rebuild_with_progress(
            &StoredDocuments(store),
            &mut super::admin::progress("documents indexed"),
        )
        .map_err(|e| e.to_string())?;
    super::admin::end_progress();
    // What the rebuild read is now in the index: the outbox is done.
    loop {
        let page = store
            .read_outbox(&consumer, 4096)
            .map_err(|e| e.to_string())?;
        if page.through == 0 {
            break;
        }
        store
            .advance_outbox(&consumer, page.through)
            .map_err(|e| e.to_string())?;
    }
    store.flush().map_err(|e| e.to_string())?;
    println!(
        "reindexed {docs} documents in {:.1} s into {}",
        started.elapsed().as_secs_f64(),
        dir.display()
    );
    Ok(())
}
