//! Per-RPC admission: the caller the auth interceptor (`server::auth`) put
//! in the request's extensions, checked against the request's namespace and
//! what the RPC needs (a role, or for review decisions the admin role or
//! the review permission). Handlers call [`admit`] first.

use tonic::{Request, Status};

use crate::config::auth::{Permission, Role, ANY_NAMESPACE};
use crate::error::Error;
use crate::pb;

/// Who is calling, put in the request's extensions by the interceptor.
#[derive(Debug, Clone)]
pub enum Caller {
    /// Auth is off: every call is allowed.
    Anyone,
    /// A known key.
    Key {
        /// The key's label.
        name: String,
        /// Its namespace, or `*`.
        namespace: String,
        /// Its role.
        role: Role,
        /// Its rights beside the role.
        permissions: Vec<Permission>,
    },
}

/// What an RPC needs of its caller's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// This role or one above it.
    Role(Role),
    /// The ADMIN role, or the review permission whatever the role: write
    /// keys (the agents') do not have it, so an agent cannot approve its
    /// own summary.
    Review,
}

impl From<Role> for Need {
    fn from(role: Role) -> Need {
        Need::Role(role)
    }
}

impl Need {
    /// Whether a key with `role` and `permissions` has what this needs.
    pub fn met_by(self, role: Role, permissions: &[Permission]) -> bool {
        match self {
            Need::Role(needed) => role >= needed,
            Need::Review => role == Role::Admin || permissions.contains(&Permission::Review),
        }
    }

    /// How messages and the docs name it.
    pub fn name(self) -> &'static str {
        match self {
            Need::Role(r) => r.name(),
            Need::Review => "ADMIN or review",
        }
    }
}

/// A request that names the namespace it works in.
pub trait Namespaced {
    /// The request's namespace.
    fn namespace(&self) -> &str;
}

macro_rules! namespaced {
    ($($t:ty),* $(,)?) => {
        $(impl Namespaced for $t {
            fn namespace(&self) -> &str {
                &self.namespace
            }
        })*
    };
}

namespaced!(
    pb::CreateSessionRequest,
    pb::GetSessionRequest,
    pb::ListSessionsRequest,
    pb::CloseSessionRequest,
    pb::DeleteSessionRequest,
    pb::AppendTurnsRequest,
    pb::RemoveLastTurnRequest,
    pb::ListTurnsRequest,
    pb::SummarizeRequest,
    pb::GetSummaryRequest,
    pb::ListSummariesRequest,
    pb::GetAuditLogRequest,
    pb::ListReviewItemsRequest,
    pb::ResolveReviewItemRequest,
    pb::GetContextBundleRequest,
    pb::HandoffRequest,
    pb::WatchSessionRequest,
    pb::PutFactRequest,
    pb::GetFactRequest,
    pb::ListFactsRequest,
    pb::DeleteFactRequest,
    pb::ListEpisodesRequest,
    pb::UpdatePendingActionRequest,
    pb::SearchRequest,
    pb::EraseSubjectRequest,
    pb::ExportSubjectRequest,
    pb::ListErasuresRequest,
);

/// Most bytes of a client-chosen value (namespace, id) a log line
/// carries. Values are logged before the domain checks them, so an
/// unchecked 3 MiB namespace must not become 3 MiB of log.
pub const MAX_LOGGED_BYTES: usize = 128;

/// `value` as a log line may carry it: whole when short, else its first
/// [`MAX_LOGGED_BYTES`] (at a character boundary) and its length.
pub fn loggable(value: &str) -> std::borrow::Cow<'_, str> {
    if value.len() <= MAX_LOGGED_BYTES {
        return value.into();
    }
    let mut end = MAX_LOGGED_BYTES;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &value[..end], value.len()).into()
}

/// The name records give a caller when auth is off.
pub const ANYONE: &str = "anyone";

/// As [`admit`], also returning who called: the key's name, or
/// [`ANYONE`] with auth off (for records that say who asked).
pub fn admit_named<T: Namespaced>(
    request: Request<T>,
    need: impl Into<Need>,
) -> Result<(T, String), Status> {
    let name = match request.extensions().get::<Caller>() {
        Some(Caller::Key { name, .. }) => name.clone(),
        _ => ANYONE.to_owned(),
    };
    admit(request, need).map(|msg| (msg, name))
}

/// The request's message if its caller may do what `need` says in the
/// request's namespace; PERMISSION_DENIED otherwise.
pub fn admit<T: Namespaced>(request: Request<T>, need: impl Into<Need>) -> Result<T, Status> {
    let need = need.into();
    let (_, extensions, msg) = request.into_parts();
    match extensions.get::<Caller>() {
        Some(Caller::Anyone) => Ok(msg),
        Some(Caller::Key {
            name,
            namespace,
            role: has,
            permissions,
        }) => {
            if namespace != ANY_NAMESPACE && namespace != msg.namespace() {
                tracing::info!(key = %name, namespace = %loggable(msg.namespace()), "key used outside its namespace");
                return Err(Error::PermissionDenied(format!(
                    "this API key is for namespace {namespace:?}, not {:?}",
                    loggable(msg.namespace())
                ))
                .into());
            }
            if !need.met_by(*has, permissions) {
                tracing::info!(key = %name, "key role too low");
                let message = match need {
                    Need::Role(role) => format!(
                        "this call needs a {} key; this key is {}",
                        role.name(),
                        has.name()
                    ),
                    Need::Review => format!(
                        "resolving a review item needs an ADMIN key or a key with the review \
                         permission (permissions = [\"review\"], given to the reviewers' keys, not \
                         the agent's); this key is {} without it",
                        has.name()
                    ),
                };
                return Err(Error::PermissionDenied(message).into());
            }
            Ok(msg)
        }
        // The interceptor is on every MemoryService route; a request
        // without a caller means it was bypassed, so refuse.
        None => {
            Err(Error::Internal("request reached a handler without an auth check".into()).into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_at_a_character_boundary() {
        assert_eq!(loggable("ns"), "ns");
        let long = "é".repeat(1000);
        let shown = loggable(&long);
        assert!(shown.len() < MAX_LOGGED_BYTES + 20, "{shown}");
        assert!(shown.ends_with("(2000 bytes)"), "{shown}");
    }
}
