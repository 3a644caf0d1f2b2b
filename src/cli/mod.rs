//! The `mnemo` command line: `serve` runs the daemon; the other subcommands
//! are a small gRPC client for people (create a session, append, list).
//! Errors print one line (gRPC status and message) and exit non-zero.

mod admin;
mod audit;
mod compact;
mod inspect;
mod json;
mod knowledge;
mod mcp;
mod pipe;
mod remote;
mod retention;
mod serve;
mod sessions;
mod subject;
mod turns_file;

use self::serve::serve;
use self::sessions::*;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use crate::client::{self, ClientOptions, MemoryClient};
use crate::config::Overrides;
use crate::pb;

/// mnemo: persistent memory for AI agents.
#[derive(Debug, Parser)]
#[command(name = "mnemo", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the daemon.
    Serve(Overrides),
    /// Manage sessions.
    #[command(subcommand)]
    Session(SessionCommand),
    /// Append one turn to a session, or many from a JSON-lines file.
    Append {
        #[command(flatten)]
        target: Target,
        /// Who produced the turn.
        #[arg(long, value_enum, default_value = "user")]
        role: RoleArg,
        /// Agent or person id.
        #[arg(long, default_value = "")]
        speaker: String,
        /// Turn text.
        #[arg(required_unless_present = "file", conflicts_with = "file")]
        content: Option<String>,
        /// Turns as JSON lines (`{"role": "user", "speaker": "…",
        /// "content": "…", "tool_call": {…}, "metadata": {…}}`); `-` reads
        /// stdin. Sent in batches of at most 256 turns, in order.
        #[arg(long)]
        file: Option<std::path::PathBuf>,
        /// Retry key: a retry with the same key writes nothing (with
        /// --file, batch N uses `<key>-N`).
        #[arg(long)]
        idempotency_key: Option<String>,
        /// Fail with ABORTED unless the session's next seq is this.
        #[arg(long)]
        expected_next_seq: Option<u64>,
        /// Fencing: fail unless the session's lease epoch is this.
        #[arg(long)]
        lease_epoch: Option<u64>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Print a context bundle: what an agent needs to continue the
    /// session, within a token budget.
    Bundle {
        #[command(flatten)]
        target: Target,
        /// Most tokens the bundle may take (256 to 1000000).
        #[arg(long, default_value_t = 8000)]
        budget: u32,
        /// What the agent is about to do (ranks summary items).
        #[arg(long, default_value = "")]
        query: String,
        /// The agent that will read it.
        #[arg(long, default_value = "")]
        agent: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Hand a session from one agent to another and print the new owner's
    /// bundle.
    Handoff {
        #[command(flatten)]
        target: Target,
        /// The current owner.
        #[arg(long)]
        from: String,
        /// The new owner.
        #[arg(long)]
        to: String,
        /// The session's current lease epoch.
        #[arg(long)]
        lease_epoch: u64,
        /// Why.
        #[arg(long, default_value = "")]
        reason: String,
        /// Retry key: a retry with the same key hands off only once.
        #[arg(long)]
        idempotency_key: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Follow a session live: print turns, summaries, handoffs and state
    /// changes as they happen (Ctrl-C to stop).
    Watch {
        #[command(flatten)]
        target: Target,
        /// Replay from this seq first (default: live only).
        #[arg(long, default_value_t = 0)]
        from: u64,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Summarize the turns not yet covered and print the summary.
    Summarize {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Print a session's latest (or a given) summary, Markdown by default.
    Summary {
        #[command(flatten)]
        target: Target,
        /// Summary version (default: the latest).
        #[arg(long, default_value_t = 0)]
        version: u64,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Manage facts about subjects.
    #[command(subcommand)]
    Fact(knowledge::FactCommand),
    /// Search turns, facts and episodes (BM25 ranked).
    Search(knowledge::SearchArgs),
    /// List a subject's past sessions, newest first.
    Episodes(knowledge::EpisodesArgs),
    /// Set the status of a pending action (DONE stops it carrying over).
    Action(knowledge::ActionArgs),
    /// Rebuild the search index of a data directory from its store (with
    /// the daemon stopped; the daemon also rebuilds a missing index).
    Reindex(Overrides),
    /// Write a namespace or session as JSON lines (daemon stopped).
    Export(admin::ExportArgs),
    /// Restore an export into a data directory (daemon stopped).
    Import(admin::ImportArgs),
    /// Check every record's checksum and the cross-references (daemon
    /// stopped); exit status 1 when anything is wrong.
    Verify(admin::VerifyArgs),
    /// Manage API keys.
    #[command(subcommand)]
    Key(admin::KeyCommand),
    /// A subject's data: export it (access request) or erase it.
    #[command(subcommand)]
    Subject(subject::SubjectCommand),
    /// Rewrite a stopped daemon's data directory so removed records'
    /// bytes leave its files (after an erase).
    Compact(compact::CompactArgs),
    /// What the retention policies (`[[retention]]` in the config) would
    /// remove now, per namespace and kind (`--dry-run`; the daemon
    /// applies them).
    Retention(retention::RetentionArgs),
    /// Serve a daemon's memory as MCP tools (Model Context Protocol), over
    /// stdio or Streamable HTTP, for agents and MCP hosts.
    Mcp(mcp::McpArgs),
    /// Serve a web inspector for people: sessions, turns, summaries and
    /// the turns they cite, bundle previews, subjects, search, review.
    Inspect(inspect::InspectArgs),
    /// Print a session's audit log: who wrote or tried each summary, every
    /// model call's status, tokens, time and error, fallbacks and reviews.
    Audit(audit::AuditArgs),
    /// List a session's turns, oldest first.
    Turns {
        #[command(flatten)]
        target: Target,
        /// First seq.
        #[arg(long, default_value_t = 1)]
        from: u64,
        /// Last seq (default: the newest).
        #[arg(long)]
        to: Option<u64>,
        /// Only the last N turns of the range.
        #[arg(long)]
        last: Option<u32>,
        #[command(flatten)]
        client: ClientArgs,
    },
}

#[derive(Debug, Subcommand)]
enum SessionCommand {
    /// Create a session and print its id.
    Create {
        /// Namespace.
        #[arg(long, short)]
        namespace: String,
        /// Session id (default: a generated ULID).
        #[arg(long)]
        id: Option<String>,
        /// Subject (user, customer, project) of the session.
        #[arg(long, default_value = "")]
        subject: String,
        /// Title.
        #[arg(long, default_value = "")]
        title: String,
        /// The agent that owns the session.
        #[arg(long, default_value = "")]
        owner: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show one session.
    Show {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List sessions of a namespace.
    List {
        /// Namespace.
        #[arg(long, short)]
        namespace: String,
        /// Only this subject.
        #[arg(long, default_value = "")]
        subject: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Close a session.
    Close {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Delete a session and all its turns.
    Delete {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        client: ClientArgs,
    },
}

#[derive(Debug, clap::Args)]
struct Target {
    /// Namespace.
    #[arg(long, short)]
    namespace: String,
    /// Session id.
    #[arg(long, short)]
    session: String,
}

#[derive(Debug, clap::Args)]
pub(crate) struct ClientArgs {
    /// Daemon address (`https://` for TLS).
    #[arg(long, env = "MNEMO_ADDR", default_value = "http://127.0.0.1:50051")]
    addr: String,
    /// API key, sent as `authorization: Bearer <key>`.
    #[arg(long, env = "MNEMO_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// CA certificate (PEM) that signed the daemon's TLS certificate.
    #[arg(long, env = "MNEMO_CA_CERT")]
    ca_cert: Option<std::path::PathBuf>,
    /// Client certificate (PEM) for mutual TLS; needs --client-key.
    #[arg(long, env = "MNEMO_CLIENT_CERT", requires = "client_key")]
    client_cert: Option<std::path::PathBuf>,
    /// Client certificate's key (PEM).
    #[arg(long, env = "MNEMO_CLIENT_KEY", requires = "client_cert")]
    client_key: Option<std::path::PathBuf>,
    /// Print JSON (one object, or one per line for lists and streams)
    /// instead of text for people.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum RoleArg {
    User,
    Assistant,
    System,
    Tool,
}

/// Creates (or truncates) `path` for an export, readable by its owner only
/// (0600 on Unix): exports hold turns and subjects' data in clear.
pub(crate) fn create_private_file(path: &std::path::Path) -> Result<std::fs::File, String> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    // An existing file keeps its mode through open(): set it.
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", path.display()))?;
    Ok(file)
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Serve(_) | Command::Mcp(_)) {
        pipe::end_quietly_on_broken_pipe();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(cli));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("error: {msg}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Serve(overrides) => serve(overrides).await,
        Command::Session(cmd) => session(cmd).await.map_err(status_line),
        Command::Fact(cmd) => knowledge::fact(cmd).await,
        Command::Search(args) => knowledge::search(args).await,
        Command::Episodes(args) => knowledge::episodes(args).await,
        Command::Action(args) => knowledge::action(args).await,
        Command::Key(cmd) => admin::key(cmd),
        Command::Subject(cmd) => subject::subject(cmd).await,
        Command::Compact(args) => blocking(move || compact::compact(args)).await,
        Command::Retention(args) => blocking(move || retention::retention(args)).await,
        Command::Mcp(args) => mcp::mcp(args).await,
        Command::Inspect(args) => inspect::inspect(args).await,
        Command::Audit(args) => audit::audit(args).await,
        Command::Export(args) => blocking(move || admin::export(args)).await,
        Command::Import(args) => blocking(move || admin::import(args)).await,
        Command::Verify(args) => blocking(move || admin::verify(args)).await,
        Command::Reindex(overrides) => {
            tokio::task::spawn_blocking(move || knowledge::reindex(&overrides))
                .await
                .map_err(|e| e.to_string())?
        }
        Command::Append {
            target,
            role,
            speaker,
            content,
            file,
            idempotency_key,
            expected_next_seq,
            lease_epoch,
            client,
        } => {
            let batches: Vec<Vec<pb::NewTurn>> = match (&file, content) {
                (Some(path), _) => {
                    let mut input: Box<dyn std::io::BufRead> = if path.as_os_str() == "-" {
                        Box::new(std::io::BufReader::new(std::io::stdin().lock()))
                    } else {
                        Box::new(std::io::BufReader::new(
                            std::fs::File::open(path)
                                .map_err(|e| format!("cannot open {}: {e}", path.display()))?,
                        ))
                    };
                    let turns = turns_file::read(&mut input)?;
                    turns.chunks(FILE_BATCH).map(<[_]>::to_vec).collect()
                }
                (None, content) => {
                    let role = match role {
                        RoleArg::User => pb::Role::User,
                        RoleArg::Assistant => pb::Role::Assistant,
                        RoleArg::System => pb::Role::System,
                        RoleArg::Tool => pb::Role::Tool,
                    };
                    vec![vec![pb::NewTurn {
                        role: role as i32,
                        speaker,
                        content: content.unwrap_or_default(),
                        ..Default::default()
                    }]]
                }
            };
            let mut c = connect(&client).await?;
            let many = batches.len() > 1;
            let mut expected = expected_next_seq.unwrap_or(0);
            for (i, turns) in batches.into_iter().enumerate() {
                let key = match &idempotency_key {
                    Some(k) if file.is_some() => format!("{k}-{i}"),
                    Some(k) => k.clone(),
                    None => String::new(),
                };
                let r = c
                    .append_turns(pb::AppendTurnsRequest {
                        namespace: target.namespace.clone(),
                        session_id: target.session.clone(),
                        turns,
                        idempotency_key: key,
                        expected_next_seq: expected,
                        lease_epoch: lease_epoch.unwrap_or(0),
                    })
                    .await
                    .map_err(|s| {
                        let line = status_line(s);
                        if many {
                            format!("batch {i} (earlier batches were appended): {line}")
                        } else {
                            line
                        }
                    })?
                    .into_inner();
                if expected != 0 {
                    expected = r.last_seq + 1;
                }
                if client.json {
                    let v = serde_json::json!({
                        "first_seq": r.first_seq,
                        "last_seq": r.last_seq,
                        "token_counts": r.token_counts,
                        "total_tokens": r.total_tokens,
                        "replayed": r.replayed,
                    });
                    println!("{v}");
                } else if r.first_seq == r.last_seq {
                    println!(
                        "seq {} ({} tokens; session total {}){}",
                        r.first_seq,
                        r.token_counts.first().copied().unwrap_or(0),
                        r.total_tokens,
                        if r.replayed { " [replayed]" } else { "" }
                    );
                } else {
                    println!(
                        "seqs {}-{} ({} tokens; session total {}){}",
                        r.first_seq,
                        r.last_seq,
                        r.token_counts.iter().map(|&n| u64::from(n)).sum::<u64>(),
                        r.total_tokens,
                        if r.replayed { " [replayed]" } else { "" }
                    );
                }
            }
            Ok(())
        }
        Command::Bundle {
            target,
            budget,
            query,
            agent,
            client,
        } => {
            let mut c = connect(&client).await?;
            let b = c
                .get_context_bundle(pb::GetContextBundleRequest {
                    namespace: target.namespace,
                    session_id: target.session,
                    budget_tokens: budget,
                    query,
                    agent_id: agent,
                    ..Default::default()
                })
                .await
                .map_err(status_line)?
                .into_inner()
                .bundle
                .unwrap_or_default();
            if client.json {
                println!("{:#}", json::bundle(&b));
            } else {
                println!("{}", b.rendered_text);
                eprintln!(
                    "({} of {} tokens, as of turn {})",
                    b.token_count, b.budget_tokens, b.as_of_seq
                );
            }
            Ok(())
        }
        Command::Handoff {
            target,
            from,
            to,
            lease_epoch,
            reason,
            idempotency_key,
            client,
        } => {
            let mut c = connect(&client).await?;
            let h = c
                .handoff(pb::HandoffRequest {
                    namespace: target.namespace,
                    session_id: target.session,
                    from_agent: from,
                    to_agent: to.clone(),
                    reason,
                    lease_epoch,
                    budget_tokens: 0,
                    idempotency_key: idempotency_key.unwrap_or_default(),
                })
                .await
                .map_err(status_line)?
                .into_inner();
            if client.json {
                let v = serde_json::json!({
                    "to_agent": to,
                    "lease_epoch": h.lease_epoch,
                    "event_seq": h.event_seq,
                    "replayed": h.replayed,
                    "bundle": h.bundle.as_ref().map(json::bundle),
                });
                println!("{v}");
                return Ok(());
            }
            println!("{}", h.bundle.unwrap_or_default().rendered_text);
            eprintln!(
                "handed off to {to}: lease epoch {} (event turn {})",
                h.lease_epoch, h.event_seq
            );
            Ok(())
        }
        Command::Watch {
            target,
            from,
            client,
        } => {
            let mut c = connect(&client).await?;
            let mut stream = c
                .watch_session(pb::WatchSessionRequest {
                    namespace: target.namespace,
                    session_id: target.session,
                    from_seq: from,
                    observer: false,
                })
                .await
                .map_err(status_line)?
                .into_inner();
            while let Some(ev) = stream.message().await.map_err(status_line)? {
                if client.json {
                    println!("{}", json::event(&ev));
                } else {
                    print_event(ev);
                }
            }
            Ok(())
        }
        Command::Summarize { target, client } => {
            let mut c = connect(&client).await?;
            let s = c
                .summarize(pb::SummarizeRequest {
                    namespace: target.namespace.clone(),
                    session_id: target.session.clone(),
                    wait: true,
                })
                .await
                .map_err(status_line)?
                .into_inner();
            let version = s.summary.map_or(0, |s| s.version);
            print_summary(&mut c, target, version, client.json).await
        }
        Command::Summary {
            target,
            version,
            client,
        } => {
            let mut c = connect(&client).await?;
            print_summary(&mut c, target, version, client.json).await
        }
        Command::Turns {
            target,
            from,
            to,
            last,
            client,
        } => {
            let mut c = connect(&client).await?;
            let mut token = String::new();
            let mut first_page = true;
            loop {
                let page = c
                    .list_turns(pb::ListTurnsRequest {
                        namespace: target.namespace.clone(),
                        session_id: target.session.clone(),
                        from_seq: from,
                        to_seq: to.unwrap_or(0),
                        page_size: 1000,
                        page_token: token,
                        newest: last.unwrap_or(0),
                    })
                    .await
                    .map_err(status_line)?
                    .into_inner();
                if let Some(r) = page.turns_removed.as_ref().filter(|_| first_page) {
                    // Said once, beside the turns (stderr with --json, so
                    // the output stays one JSON object per line).
                    let line = format!(
                        "turns 1-{} ({}) were removed by a retention policy",
                        r.through_seq, r.count
                    );
                    if client.json {
                        eprintln!("{line}");
                    } else {
                        println!("({line})");
                    }
                }
                first_page = false;
                for t in &page.turns {
                    if client.json {
                        println!("{}", json::turn(t));
                    } else {
                        print_turn(t);
                    }
                }
                if page.next_page_token.is_empty() {
                    return Ok(());
                }
                token = page.next_page_token;
            }
        }
    }
}

async fn print_summary(
    c: &mut MemoryClient,
    target: Target,
    version: u64,
    json: bool,
) -> Result<(), String> {
    let format = if json {
        pb::SummaryFormat::Json
    } else {
        pb::SummaryFormat::Markdown
    };
    let r = c
        .get_summary(pb::GetSummaryRequest {
            namespace: target.namespace.clone(),
            session_id: target.session.clone(),
            version,
            format: format as i32,
        })
        .await
        .map_err(status_line)?
        .into_inner();
    // Who wrote it (the rules, a model, a model with the rules' floor, a
    // fallback), from the attempt that stored it.
    let stored = r.summary.as_ref().map_or(version, |s| s.version);
    // A key that may read summaries but not the audit log still gets the
    // summary: the writer is then "unknown".
    let writer = audit::writer_of(c, &target, stored)
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| "unknown".to_owned());
    if json {
        let mut v: serde_json::Value = serde_json::from_str(&r.rendered)
            .map_err(|e| format!("the daemon's JSON summary does not parse: {e}"))?;
        if let Some(o) = v.as_object_mut() {
            o.insert("written_by".into(), serde_json::Value::String(writer));
        }
        println!("{v:#}");
    } else {
        println!("{}", r.rendered);
        println!("_Written by {writer}._");
    }
    Ok(())
}

/// Turns per AppendTurns call when appending a file (the daemon's
/// default `max_turns_per_append`).
const FILE_BATCH: usize = 256;

/// Runs store work off the async runtime.
async fn blocking(f: impl FnOnce() -> Result<(), String> + Send + 'static) -> Result<(), String> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| e.to_string())?
}

/// A failed call in one line: the code, the reason when the daemon sent
/// one (`mnemo-reason`), and the message.
pub(crate) fn status_line(s: tonic::Status) -> String {
    match s
        .metadata()
        .get(crate::api::status::REASON)
        .and_then(|v| v.to_str().ok())
    {
        Some(reason) => format!("{:?} ({reason}): {}", s.code(), s.message()),
        None => format!("{:?}: {}", s.code(), s.message()),
    }
}
