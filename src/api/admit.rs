//! Per-RPC admission: the caller the auth interceptor (`server::auth`) put
//! in the request's extensions, checked against the request's namespace and
//! the role the RPC needs. Handlers call [`admit`] first.

use tonic::{Request, Status};

use crate::config::auth::{Role, ANY_NAMESPACE};
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
    },
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

/// As [`admit`], also returning who called: the key's name, or
/// "anyone" with auth off (for records that say who asked).
pub fn admit_named<T: Namespaced>(request: Request<T>, role: Role) -> Result<(T, String), Status> {
    let name = match request.extensions().get::<Caller>() {
        Some(Caller::Key { name, .. }) => name.clone(),
        _ => "anyone".to_owned(),
    };
    admit(request, role).map(|msg| (msg, name))
}

/// The request's message if its caller may do what needs `role` in the
/// request's namespace; PERMISSION_DENIED otherwise.
pub fn admit<T: Namespaced>(request: Request<T>, role: Role) -> Result<T, Status> {
    let (_, extensions, msg) = request.into_parts();
    match extensions.get::<Caller>() {
        Some(Caller::Anyone) => Ok(msg),
        Some(Caller::Key {
            name,
            namespace,
            role: has,
        }) => {
            if namespace != ANY_NAMESPACE && namespace != msg.namespace() {
                tracing::info!(key = %name, namespace = msg.namespace(), "key used outside its namespace");
                return Err(Error::PermissionDenied(format!(
                    "this API key is for namespace {namespace:?}, not {:?}",
                    msg.namespace()
                ))
                .into());
            }
            if *has < role {
                tracing::info!(key = %name, "key role too low");
                return Err(Error::PermissionDenied(format!(
                    "this call needs a {} key; this key is {}",
                    role.name(),
                    has.name()
                ))
                .into());
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
