//! Operator commands: `key create` (and, working on a stopped daemon's
//! data directory, the maintenance commands).

use clap::Subcommand;

use crate::auth::{self, Role};

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
        /// A label for logs.
        #[arg(long, default_value = "agent")]
        name: String,
    },
}

/// Runs a `key` subcommand.
pub fn key(cmd: KeyCommand) -> Result<(), String> {
    match cmd {
        KeyCommand::Create {
            namespace,
            role,
            name,
        } => {
            if namespace.is_empty() {
                return Err("--namespace must name a namespace or be \"*\"".into());
            }
            let (key, sha256) = auth::new_key().map_err(|e| e.to_string())?;
            let role = match role {
                Role::Read => "read",
                Role::Write => "write",
                Role::Admin => "admin",
            };
            println!("API key (shown once; the daemon keeps only its hash):\n\n  {key}\n");
            println!("Add to the daemon's config file and restart it:\n");
            println!("[[auth.keys]]");
            println!("name = {}", toml_string(&name));
            println!("namespace = {}", toml_string(&namespace));
            println!("role = \"{role}\"");
            println!("sha256 = \"{sha256}\"");
            Ok(())
        }
    }
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}
