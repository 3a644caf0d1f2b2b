//! Retention policies (`[[retention]]` tables): how long each kind of
//! record is kept, per namespace. Only the shape and its validation live
//! here; what is due when is the domain's (`memory::retention`).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The namespace name of a table that applies to every namespace without
/// a table of its own.
pub const ANY_NAMESPACE: &str = "*";

/// Longest retention period accepted, in days (about 1000 years): keeps
/// the cut-off arithmetic in range.
pub const MAX_DAYS: i64 = 365_000;

/// Most summary versions a `summary_versions` bound may keep.
pub const MAX_SUMMARY_VERSIONS: i64 = 1_000_000;

/// One `[[retention]]` table. A kind left out is kept forever.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionRule {
    /// The namespace it applies to, or `"*"` for every namespace without
    /// a table of its own (a namespace's own table replaces the `"*"`
    /// table as a whole, kind by kind it does not fall back).
    pub namespace: String,
    /// Turns of a CLOSED session go this many days after its last append.
    pub turns_days: Option<i64>,
    /// Summary versions and episodes go this many days after they were
    /// written (a session's latest summary only once the session is
    /// CLOSED).
    pub summaries_days: Option<i64>,
    /// Audit records go this many days after they were written.
    pub audit_days: Option<i64>,
    /// A fact whose current version was not updated for this many days
    /// goes, with its superseded versions.
    pub facts_days: Option<i64>,
    /// A session keeps its newest this many summary versions; older ones
    /// go, whatever their age. Every version is stored whole and grows
    /// with the session, so keeping them all costs disk with the square of
    /// a session's length; a bound keeps it linear.
    pub summary_versions: Option<i64>,
}

impl RetentionRule {
    /// Whether the table removes nothing.
    pub fn keeps_everything(&self) -> bool {
        self.turns_days.is_none()
            && self.summaries_days.is_none()
            && self.audit_days.is_none()
            && self.facts_days.is_none()
            && self.summary_versions.is_none()
    }
}

/// Every `[[retention]]` table of the config.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RetentionPolicy {
    rules: Vec<RetentionRule>,
}

impl RetentionPolicy {
    /// Checks `rules` (see [`validate`]) and wraps them.
    pub fn new(rules: Vec<RetentionRule>) -> Result<RetentionPolicy> {
        validate(&rules)?;
        Ok(RetentionPolicy { rules })
    }

    /// The table that applies to `ns`: its own, else the `"*"` one.
    pub fn for_namespace(&self, ns: &str) -> Option<&RetentionRule> {
        self.rules
            .iter()
            .find(|r| r.namespace == ns)
            .or_else(|| self.rules.iter().find(|r| r.namespace == ANY_NAMESPACE))
            .filter(|r| !r.keeps_everything())
    }

    /// Whether some table removes something.
    pub fn is_active(&self) -> bool {
        self.rules.iter().any(|r| !r.keeps_everything())
    }

    /// Whether some table removes facts.
    pub fn removes_facts(&self) -> bool {
        self.rules.iter().any(|r| r.facts_days.is_some())
    }
}

/// Checks the tables: a namespace (or `"*"`) each, at most one table per
/// namespace, and every period from 1 to [`MAX_DAYS`] days. The error
/// names the table and key.
pub fn validate(rules: &[RetentionRule]) -> Result<()> {
    for (i, r) in rules.iter().enumerate() {
        let at = format!("retention[{i}]");
        if r.namespace.is_empty() {
            return Err(Error::invalid(format!(
                "{at}.namespace is required (a namespace name, or \"*\" for every namespace)"
            )));
        }
        if r.namespace != ANY_NAMESPACE {
            let ok = r.namespace.len() <= crate::model::limits::MAX_ID_BYTES
                && r.namespace
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '@'));
            if !ok {
                return Err(Error::invalid(format!(
                    "{at}.namespace {:?} is not a namespace name (A-Z a-z 0-9 . _ - : @, at most {} bytes) nor \"*\"",
                    r.namespace,
                    crate::model::limits::MAX_ID_BYTES
                )));
            }
        }
        if rules[..i].iter().any(|o| o.namespace == r.namespace) {
            return Err(Error::invalid(format!(
                "{at}: namespace {:?} has more than one [[retention]] table",
                r.namespace
            )));
        }
        for (key, days) in [
            ("turns_days", r.turns_days),
            ("summaries_days", r.summaries_days),
            ("audit_days", r.audit_days),
            ("facts_days", r.facts_days),
        ] {
            if let Some(d) = days {
                if !(1..=MAX_DAYS).contains(&d) {
                    return Err(Error::invalid(format!(
                        "{at}.{key} = {d} (namespace {:?}): a retention period must be from 1 to {MAX_DAYS} days; leave the key out to keep those records forever",
                        r.namespace
                    )));
                }
            }
        }
        if let Some(n) = r.summary_versions {
            if !(1..=MAX_SUMMARY_VERSIONS).contains(&n) {
                return Err(Error::invalid(format!(
                    "{at}.summary_versions = {n} (namespace {:?}): a session keeps from 1 to {MAX_SUMMARY_VERSIONS} of its newest summary versions; leave the key out to keep every version",
                    r.namespace
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(ns: &str, turns: Option<i64>) -> RetentionRule {
        RetentionRule {
            namespace: ns.into(),
            turns_days: turns,
            ..Default::default()
        }
    }

    #[test]
    fn a_namespace_table_replaces_the_wildcard() {
        let p = RetentionPolicy::new(vec![rule("*", Some(30)), rule("legal", Some(3650))]).unwrap();
        assert_eq!(p.for_namespace("legal").unwrap().turns_days, Some(3650));
        assert_eq!(p.for_namespace("other").unwrap().turns_days, Some(30));
        let none = RetentionPolicy::new(vec![rule("a", Some(1))]).unwrap();
        assert!(none.for_namespace("b").is_none());
        assert!(!RetentionPolicy::default().is_active());
    }

    #[test]
    fn bad_tables_are_refused_naming_the_key() {
        for (rules, needle) in [
            (vec![rule("a", Some(0))], "retention[0].turns_days = 0"),
            (vec![rule("a", Some(-3))], "retention[0].turns_days = -3"),
            (
                vec![rule("", Some(3))],
                "retention[0].namespace is required",
            ),
            (
                vec![rule("a", Some(3)), rule("a", Some(4))],
                "retention[1]: namespace \"a\"",
            ),
            (
                vec![RetentionRule {
                    namespace: "a".into(),
                    summary_versions: Some(0),
                    ..Default::default()
                }],
                "retention[0].summary_versions = 0",
            ),
        ] {
            let e = validate(&rules).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }
}
