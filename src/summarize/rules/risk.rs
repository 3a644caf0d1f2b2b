//! Risk: irreversible actions that need human review.
//! Pure functions of their input; they return slices of it, never new text.

pub(crate) const IRREVERSIBLE: &[&str] = &[
    "delete",
    "deleted",
    "deletes",
    "deleting",
    "deletion",
    "refund",
    "refunds",
    "refunded",
    "refunding",
    "pay",
    "paid",
    "pays",
    "paying",
    "payment",
    "payments",
    "payout",
    "transfer",
    "transfers",
    "transferred",
    "transferring",
    "send",
    "sends",
    "sent",
    "sending",
    "deploy",
    "deploys",
    "deployed",
    "deploying",
    "deployment",
    "drop",
    "drops",
    "dropped",
    "dropping",
    "wire",
    "wired",
    "wiring",
    "cancel",
    "cancels",
    "cancelled",
    "canceled",
    "cancelling",
    "canceling",
    "cancellation",
    "purge",
    "purged",
    "purging",
    "wipe",
    "wiped",
    "wiping",
    "destroy",
    "destroyed",
    "destroying",
    "terminate",
    "terminated",
    "terminating",
    "revoke",
    "revoked",
    "revoking",
    "truncate",
    "truncated",
    "erase",
    "erased",
    "publish",
    "published",
    "rm",
    "shutdown",
    "withdraw",
    "withdrawal",
    "charge",
    "charged",
];

/// Whether text names an irreversible action (delete, refund, pay,
/// transfer, send, deploy, drop, wire, cancel…). Words are also split at
/// `_`, `-`, `.` and camelCase so tool names like `issueRefund` or
/// `delete_file` count.
pub fn is_irreversible(text: &str) -> bool {
    let mut parts: Vec<String> = Vec::new();
    for raw in text.split(|c: char| !c.is_alphanumeric()) {
        let mut cur = String::new();
        let mut prev_lower = false;
        for c in raw.chars() {
            if c.is_uppercase() && prev_lower {
                parts.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase();
            cur.extend(c.to_lowercase());
        }
        if !cur.is_empty() {
            parts.push(cur);
        }
    }
    parts.iter().any(|p| IRREVERSIBLE.contains(&p.as_str()))
}
