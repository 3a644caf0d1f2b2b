//! Operator commands: `key create`, and the maintenance commands that
//! work on a stopped daemon's data directory: `export`, `import`,
//! `verify` (with a running count on stderr when it is a terminal).

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use clap::Subcommand;

use crate::config::{Config, Overrides, StoreKind};
use crate::search::SearchIndex;
use crate::server::auth::{self, Permission, Role};
use crate::store::dump::{self, Scope};
use crate::store::engine::Engine;
use crate::store::{PgStore, SledStore, Store};

/// `mnemo key …`
#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Make a new API key: prints the key once (give it to the client)
    /// and the config lines that let the daemon accept it.
    Create {
        /// The namespace the key may use, or "*" for every namespace.
        #[arg(long, short)]
        namespace: String,
        /// What the key may do.
        #[arg(long, value_enum, default_value = "write")]
        role: Role,
        /// A right beside the role (repeat the flag): `review` lets the key
        /// approve and reject review items. Give it to the keys of the
        /// people who review, never to an agent's key.
        #[arg(long = "permission", value_enum)]
        permissions: Vec<Permission>,
        /// A label for logs.
        #[arg(long, default_value = "agent")]
        name: String,
        /// Print the key and its config entry as one JSON object.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a `key` subcommand.
pub fn key(cmd: KeyCommand) -> Result<(), String> {
    match cmd {
        KeyCommand::Create {
            namespace,
            role,
            permissions,
            name,
            json,
        } => {
            if namespace.is_empty() {
                return Err("--namespace must name a namespace or be \"*\"".into());
            }
            let (key, sha256) = auth::new_key().map_err(|e| e.to_string())?;
            // The config spells roles in lowercase.
            let role = role.name().to_lowercase();
            let mut permissions: Vec<&str> = permissions.iter().map(|p| p.name()).collect();
            permissions.sort_unstable();
            permissions.dedup();
            if json {
                let mut config = serde_json::json!({"name": name, "namespace": namespace, "role": role, "sha256": sha256});
                if !permissions.is_empty() {
                    config["permissions"] = serde_json::json!(permissions);
                }
                let v = serde_json::json!({"key": key, "config": config});
                println!("{v}");
                return Ok(());
            }
            println!("API key (shown once; the daemon keeps only its hash):\n\n  {key}\n");
            println!("Add to the daemon's config file, then send it SIGHUP (or restart it):\n");
            println!("[[auth.keys]]");
            println!("name = {}", toml_string(&name));
            println!("namespace = {}", toml_string(&namespace));
            println!("role = \"{role}\"");
            if !permissions.is_empty() {
                let list: Vec<String> = permissions.iter().map(|p| toml_string(p)).collect();
                println!("permissions = [{}]", list.join(", "));
            }
            println!("sha256 = \"{sha256}\"");
            Ok(())
        }
    }
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// `mnemo export`
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Only this namespace (default: every namespace).
    #[arg(long, short)]
    namespace: Option<String>,
    /// Only this session of the namespace (its facts are left out: they
    /// belong to the subject).
    #[arg(long, short, requires = "namespace")]
    session: Option<String>,
    /// Write here instead of stdout.
    #[arg(long, short)]
    output: Option<PathBuf>,
    #[command(flatten)]
    store: Overrides,
}

/// `mnemo import`
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The export file (JSON lines); `-` reads stdin.
    input: PathBuf,
    #[command(flatten)]
    store: Overrides,
}

/// `mnemo verify`
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// List at most this many problems.
    #[arg(long, default_value_t = 100)]
    max_problems: usize,
    #[command(flatten)]
    store: Overrides,
}

/// The store an admin command works on.
pub(super) enum AdminStore {
    /// A stopped daemon's sled data directory (locked while it runs).
    Sled(SledStore),
    /// The shared PostgreSQL database (daemons may be running).
    Postgres(PgStore),
}

impl AdminStore {
    /// Its engine (export, import and verify work on the keyspace).
    pub(super) fn engine(&self) -> &dyn Engine {
        match self {
            AdminStore::Sled(s) => s.engine(),
            AdminStore::Postgres(s) => s.engine(),
        }
    }

    /// Its ports.
    pub(super) fn store(&self) -> &dyn Store {
        match self {
            AdminStore::Sled(s) => s,
            AdminStore::Postgres(s) => s,
        }
    }

    /// The outbox consumer of the search index in `data_dir`.
    pub(super) fn search_consumer(&self, data_dir: &std::path::Path) -> Result<String, String> {
        match self {
            AdminStore::Sled(_) => Ok(crate::memory::SEARCH_CONSUMER.to_owned()),
            AdminStore::Postgres(_) => crate::server::node_id(data_dir)
                .map(|id| format!("{}@{id}", crate::memory::SEARCH_CONSUMER))
                .map_err(|e| e.to_string()),
        }
    }
}

/// Opens the store the overrides name: the sled data directory (the
/// daemon must be stopped) or the PostgreSQL database.
pub(super) fn open_store(overrides: &Overrides) -> Result<(AdminStore, PathBuf), String> {
    let config = Config::resolve(overrides).map_err(|e| e.to_string())?;
    let store = match config.store {
        StoreKind::Sled => AdminStore::Sled(
            SledStore::open_with_cache(&config.data_dir, config.cache_mb)
                .map_err(|e| e.to_string())?,
        ),
        StoreKind::Postgres => AdminStore::Postgres(
            PgStore::connect(&crate::store::postgres::PgOptions::from_config(
                &config.postgres,
            ))
            .map_err(|e| e.to_string())?,
        ),
        StoreKind::Memory => {
            return Err("this command works on a stored memory: --store sled or postgres".into())
        }
    };
    Ok((store, config.data_dir))
}

/// Calls back with a running count on stderr when it is a terminal.
pub(super) fn progress(what: &'static str) -> impl FnMut(u64) {
    let tty = std::io::stderr().is_terminal();
    move |n| {
        if tty {
            eprint!("\r{what}: {n}");
            let _ = std::io::stderr().flush();
        }
    }
}

pub(super) fn end_progress() {
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
}

/// Runs `mnemo export`.
pub fn export(args: ExportArgs) -> Result<(), String> {
    let (store, _) = open_store(&args.store)?;
    let scope = Scope {
        namespace: args.namespace,
        session: args.session,
    };
    let mut out: Box<dyn Write> = match &args.output {
        Some(p) => Box::new(std::io::BufWriter::new(super::create_private_file(p)?)),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let n = dump::export(
        store.engine(),
        &scope,
        &mut out,
        &mut progress("records exported"),
    )
    .map_err(|e| e.to_string())?;
    drop(out);
    if let Some(p) = &args.output {
        let f = std::fs::File::open(p).map_err(|e| e.to_string())?;
        f.sync_all()
            .map_err(|e| format!("cannot sync {}: {e}", p.display()))?;
    }
    end_progress();
    eprintln!("exported {n} records");
    Ok(())
}

/// Runs `mnemo import`; the search index is rebuilt at the next start.
pub fn import(args: ImportArgs) -> Result<(), String> {
    let (store, dir) = open_store(&args.store)?;
    let mut input: Box<dyn BufRead> = if args.input.as_os_str() == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin().lock()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(&args.input)
                .map_err(|e| format!("cannot open {}: {e}", args.input.display()))?,
        ))
    };
    let n = dump::import(
        store.engine(),
        &mut input,
        &mut progress("records imported"),
    )
    .map_err(|e| e.to_string())?;
    let shared = matches!(store, AdminStore::Postgres(_));
    drop(store);
    if shared {
        end_progress();
        eprintln!("imported {n} records; the daemons' search indexes pick them up from the outbox");
        return Ok(());
    }
    // The index does not know the imported records: rebuild it at start.
    let index = dir.join(crate::server::SEARCH_INDEX_DIR);
    if index.exists() {
        std::fs::remove_dir_all(&index).map_err(|e| {
            format!(
                "imported, but cannot remove the search index {}: {e}; run `mnemo reindex`",
                index.display()
            )
        })?;
    }
    end_progress();
    eprintln!("imported {n} records; the search index is rebuilt at the next start");
    Ok(())
}

/// Runs `mnemo verify`: exit status 1 when anything is wrong.
pub fn verify(args: VerifyArgs) -> Result<(), String> {
    let (store, dir) = open_store(&args.store)?;
    let mut report = dump::verify(
        store.engine(),
        args.max_problems,
        &mut progress("records checked"),
    )
    .map_err(|e| e.to_string())?;
    end_progress();
    // The index against the store.
    let index_dir = dir.join(crate::server::SEARCH_INDEX_DIR);
    let index_docs = if index_dir.exists() {
        match SearchIndex::open(Some(&index_dir)) {
            Ok((_, true)) => {
                report.problems.push(format!(
                    "the search index in {} is damaged or incomplete (the daemon rebuilds it at start; or run `mnemo reindex`)",
                    index_dir.display()
                ));
                None
            }
            Ok((index, false)) => Some(index.num_docs()),
            Err(e) => {
                report
                    .problems
                    .push(format!("the search index cannot be opened: {e}"));
                None
            }
        }
    } else {
        None
    };
    if let Some(docs) = index_docs {
        if report.pending_index_changes == 0 && docs != report.expected_index_docs {
            report.problems.push(format!(
                "the search index holds {docs} documents but the store has {} searchable records (run `mnemo reindex`)",
                report.expected_index_docs
            ));
        }
    }
    if args.json {
        let v = serde_json::json!({
            "ok": report.problems.is_empty(),
            "records": report.records,
            "sessions": report.sessions,
            "pending_index_changes": report.pending_index_changes,
            "index_documents": index_docs,
            "problems": report.problems,
        });
        println!("{v}");
    } else {
        println!(
            "checked {} records in {} sessions; {} search changes pending",
            report.records, report.sessions, report.pending_index_changes
        );
        for p in &report.problems {
            println!("problem: {p}");
        }
    }
    if report.problems.is_empty() {
        if !args.json {
            println!("ok");
        }
        Ok(())
    } else {
        Err(format!("{} problem(s) found", report.problems.len()))
    }
}
