//! The `mnemo` command line: `serve` runs the daemon; the other subcommands
//! are a small gRPC client for people (create a session, append, list).
//! Errors print one line (gRPC status and message) and exit non-zero.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use tonic::transport::Channel;

use crate::config::{Config, LogFormat, Overrides};
use crate::pb;
use crate::pb::memory_service_client::MemoryServiceClient;
use crate::server::{shutdown_signal, Daemon};

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
    /// Append one turn to a session.
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
        content: String,
        /// Retry key: a retry with the same key writes nothing.
        #[arg(long)]
        idempotency_key: Option<String>,
        /// Fail with ABORTED unless the session's next seq is this.
        #[arg(long)]
        expected_next_seq: Option<u64>,
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
        /// Print JSON instead of Markdown.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
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
struct ClientArgs {
    /// Daemon address.
    #[arg(long, env = "MNEMO_ADDR", default_value = "http://127.0.0.1:50051")]
    addr: String,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum RoleArg {
    User,
    Assistant,
    System,
    Tool,
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
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
        Command::Append {
            target,
            role,
            speaker,
            content,
            idempotency_key,
            expected_next_seq,
            client,
        } => {
            let mut c = connect(&client).await?;
            let role = match role {
                RoleArg::User => pb::Role::User,
                RoleArg::Assistant => pb::Role::Assistant,
                RoleArg::System => pb::Role::System,
                RoleArg::Tool => pb::Role::Tool,
            };
            let r = c
                .append_turns(pb::AppendTurnsRequest {
                    namespace: target.namespace,
                    session_id: target.session,
                    turns: vec![pb::NewTurn {
                        role: role as i32,
                        speaker,
                        content,
                        ..Default::default()
                    }],
                    idempotency_key: idempotency_key.unwrap_or_default(),
                    expected_next_seq: expected_next_seq.unwrap_or(0),
                    lease_epoch: 0,
                })
                .await
                .map_err(status_line)?
                .into_inner();
            println!(
                "seq {} ({} tokens; session total {}){}",
                r.first_seq,
                r.token_counts.first().copied().unwrap_or(0),
                r.total_tokens,
                if r.replayed { " [replayed]" } else { "" }
            );
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
            print_summary(&mut c, target, version, false).await
        }
        Command::Summary {
            target,
            version,
            json,
            client,
        } => {
            let mut c = connect(&client).await?;
            print_summary(&mut c, target, version, json).await
        }
        Command::Turns {
            target,
            from,
            to,
            client,
        } => {
            let mut c = connect(&client).await?;
            let mut token = String::new();
            loop {
                let page = c
                    .list_turns(pb::ListTurnsRequest {
                        namespace: target.namespace.clone(),
                        session_id: target.session.clone(),
                        from_seq: from,
                        to_seq: to.unwrap_or(0),
                        page_size: 1000,
                        page_token: token,
                    })
                    .await
                    .map_err(status_line)?
                    .into_inner();
                for t in page.turns {
                    let role = pb::Role::try_from(t.role).map_or("?", |r| r.as_str_name());
                    let role = role.trim_start_matches("ROLE_").to_lowercase();
                    println!("#{} {role} {}: {}", t.seq, t.speaker, t.content);
                    if let Some(tc) = t.tool_call {
                        println!(
                            "    tool {}({}) -> {}",
                            tc.tool_name, tc.arguments_json, tc.result
                        );
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
    c: &mut MemoryServiceClient<Channel>,
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
            namespace: target.namespace,
            session_id: target.session,
            version,
            format: format as i32,
        })
        .await
        .map_err(status_line)?
        .into_inner();
    println!("{}", r.rendered);
    Ok(())
}

async fn session(cmd: SessionCommand) -> Result<(), tonic::Status> {
    match cmd {
        SessionCommand::Create {
            namespace,
            id,
            subject,
            title,
            client,
        } => {
            let mut c = connect(&client).await.map_err(tonic::Status::unavailable)?;
            let s = c
                .create_session(pb::CreateSessionRequest {
                    namespace,
                    session_id: id.unwrap_or_default(),
                    subject_id: subject,
                    title,
                    ..Default::default()
                })
                .await?
                .into_inner();
            println!("{}", s.session.map(|s| s.session_id).unwrap_or_default());
        }
        SessionCommand::Show { target, client } => {
            let mut c = connect(&client).await.map_err(tonic::Status::unavailable)?;
            let s = c
                .get_session(pb::GetSessionRequest {
                    namespace: target.namespace,
                    session_id: target.session,
                })
                .await?
                .into_inner();
            if let Some(s) = s.session {
                print_session(&s);
            }
        }
        SessionCommand::List {
            namespace,
            subject,
            client,
        } => {
            let mut c = connect(&client).await.map_err(tonic::Status::unavailable)?;
            let mut token = String::new();
            loop {
                let page = c
                    .list_sessions(pb::ListSessionsRequest {
                        namespace: namespace.clone(),
                        subject_id: subject.clone(),
                        page_size: 1000,
                        page_token: token,
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                page.sessions.iter().for_each(print_session);
                if page.next_page_token.is_empty() {
                    break;
                }
                token = page.next_page_token;
            }
        }
        SessionCommand::Close { target, client } => {
            let mut c = connect(&client).await.map_err(tonic::Status::unavailable)?;
            c.close_session(pb::CloseSessionRequest {
                namespace: target.namespace,
                session_id: target.session,
            })
            .await?;
            println!("closed");
        }
        SessionCommand::Delete { target, client } => {
            let mut c = connect(&client).await.map_err(tonic::Status::unavailable)?;
            let r = c
                .delete_session(pb::DeleteSessionRequest {
                    namespace: target.namespace,
                    session_id: target.session,
                })
                .await?
                .into_inner();
            println!("deleted ({} turns)", r.deleted_turns);
        }
    }
    Ok(())
}

fn print_session(s: &pb::Session) {
    let state = pb::SessionState::try_from(s.state).map_or("?", |x| x.as_str_name());
    println!(
        "{}  state={}  subject={:?}  turns={}  tokens={}  title={:?}",
        s.session_id,
        state.trim_start_matches("SESSION_STATE_").to_lowercase(),
        s.subject_id,
        s.turn_count,
        s.total_tokens,
        s.title
    );
}

async fn connect(args: &ClientArgs) -> Result<MemoryServiceClient<Channel>, String> {
    MemoryServiceClient::connect(args.addr.clone())
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", args.addr))
}

fn status_line(s: tonic::Status) -> String {
    format!("{:?}: {}", s.code(), s.message())
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MNEMO_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
}

async fn serve(overrides: Overrides) -> Result<(), String> {
    let config = Config::resolve(&overrides).map_err(|e| e.to_string())?;
    init_logging(config.log_format);
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
    let daemon = Daemon::open(config).await.map_err(|e| e.to_string())?;
    daemon
        .serve(listener, shutdown_signal())
        .await
        .map_err(|e| e.to_string())
}
