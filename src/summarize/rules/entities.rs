//! Entities: identifiers, amounts, emails, URLs and the like, kept verbatim.
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

/// Kind of a token that must be kept (and checked) verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EntityKind {
    /// `http(s)://…` or `www.…`.
    Url,
    /// `name@domain.tld`.
    Email,
    /// A currency amount: `$49.99`, `€12`, `100USD`.
    Amount,
    /// An ISO date, `2026-03-20`.
    Date,
    /// A number: `49.99`, `3-5`, `10:30`, `50%`, `1,000`, `20th`.
    Number,
    /// Letters and digits mixed: `ORD-9921`, `v1.2.3`, `s3_upload`.
    Identifier,
    /// A file name or path: `report.pdf`, `src/main.rs`.
    Path,
    /// A code-like name: `order_id`, `send_email`.
    Code,
}

/// A token of a text that must stay verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entity<'a> {
    /// What it is.
    pub kind: EntityKind,
    /// The token, a slice of the input.
    pub text: &'a str,
}

pub(crate) const FILE_EXTENSIONS: &[&str] = &[
    "c", "cfg", "conf", "cpp", "csv", "doc", "docx", "go", "gz", "h", "html", "ini", "java", "jpg",
    "js", "json", "log", "md", "pdf", "png", "proto", "py", "rb", "rs", "sh", "sql", "svg", "tar",
    "toml", "ts", "tsx", "txt", "xls", "xlsx", "xml", "yaml", "yml", "zip",
];

/// Splits text into candidate tokens: whitespace and brackets, quotes and
/// semicolons separate; a comma separates unless it sits between digits
/// ("1,000"); edge punctuation is trimmed.
pub(crate) fn raw_tokens(text: &str) -> Vec<&str> {
    let is_sep = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '"' | '`' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '|' | ';'
            )
            || matches!(c, '…' | '“' | '”' | '‘' | '’' | '«' | '»')
    };
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        let comma_sep = c == ',' && {
            let prev_digit = k > 0 && chars[k - 1].1.is_ascii_digit();
            let next_digit = chars.get(k + 1).is_some_and(|&(_, n)| n.is_ascii_digit());
            !(prev_digit && next_digit)
        };
        if is_sep(c) || comma_sep {
            if let Some(s) = start.take() {
                out.push(&text[s..i]);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push(&text[s..]);
    }
    out.into_iter()
        .map(|t| {
            t.trim_start_matches(['\'', '*', '_', '~', ':'])
                .trim_end_matches(['.', ',', ':', '!', '?', '\'', '*', '_', '~'])
        })
        .filter(|t| !t.is_empty())
        .collect()
}

pub(crate) fn is_iso_date(t: &str) -> bool {
    let b = t.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
        && (b.len() == 10 || b[10] == b'T' || b[10] == b't')
}

pub(crate) fn classify_token(t: &str) -> Option<EntityKind> {
    let lower = t.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("www.") {
        return Some(EntityKind::Url);
    }
    if let Some(at) = t.find('@') {
        if at > 0 && t[at + 1..].contains('.') && !t[at + 1..].ends_with('.') {
            return Some(EntityKind::Email);
        }
    }
    let has_digit = t.chars().any(|c| c.is_ascii_digit());
    let currency = |c: char| matches!(c, '$' | '€' | '£' | '¥' | '₹');
    if has_digit
        && (t.starts_with(currency)
            || t.ends_with(currency)
            || ["usd", "eur", "gbp"]
                .iter()
                .any(|c| lower.ends_with(c) && lower.len() > 3)
                && lower.chars().next().is_some_and(|c| c.is_ascii_digit()))
    {
        return Some(EntityKind::Amount);
    }
    if is_iso_date(t) {
        return Some(EntityKind::Date);
    }
    if has_digit {
        let numeric = t
            .chars()
            .all(|c| c.is_ascii_digit() || ".,:%/-+x#".contains(c));
        let ordinal = ["st", "nd", "rd", "th"].iter().any(|s| {
            lower.ends_with(s) && lower[..lower.len() - 2].chars().all(|c| c.is_ascii_digit())
        });
        if numeric || ordinal {
            return Some(EntityKind::Number);
        }
        if t.chars().any(char::is_alphabetic) {
            return Some(EntityKind::Identifier);
        }
        return Some(EntityKind::Number);
    }
    let alnum_around = |sep: char| {
        t.split(sep).count() > 1 && t.split(sep).all(|p| p.chars().any(char::is_alphanumeric))
    };
    if alnum_around('/') || alnum_around('\\') {
        return Some(EntityKind::Path);
    }
    if let Some((stem, ext)) = t.rsplit_once('.') {
        if stem.chars().count() > 1
            && stem
                .chars()
                .all(|c| c.is_alphanumeric() || "-_.".contains(c))
            && FILE_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str())
        {
            return Some(EntityKind::Path);
        }
    }
    if is_domain(t) {
        return Some(EntityKind::Url);
    }
    if alnum_around('_') {
        return Some(EntityKind::Code);
    }
    None
}

/// Top-level domains common enough to call "name.tld" a host name.
pub(crate) const TLDS: &[&str] = &[
    "com", "org", "net", "io", "dev", "ai", "co", "app", "gov", "edu", "de", "uk", "fr", "eu",
    "se", "nl", "us", "info", "biz", "cloud", "tech", "internal", "local",
];

/// "vpn.acme-corp.com", "example.org": labels of letters, digits and
/// hyphens, the last a known top-level domain.
pub(crate) fn is_domain(t: &str) -> bool {
    let labels: Vec<&str> = t.split('.').collect();
    labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        && labels
            .last()
            .is_some_and(|tld| TLDS.contains(&tld.to_ascii_lowercase().as_str()))
}

/// The tokens of `text` that must be kept and checked verbatim, in order.
pub fn entities(text: &str) -> Vec<Entity<'_>> {
    raw_tokens(text)
        .into_iter()
        .filter_map(|t| classify_token(t).map(|kind| Entity { kind, text: t }))
        .collect()
}

pub(crate) const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

pub(crate) fn month_number(w: &str) -> Option<u32> {
    if let Some(i) = MONTHS.iter().position(|m| *m == w) {
        return u32::try_from(i + 1).ok();
    }
    // Three-letter abbreviations, but not "may"/"mar" ambiguity beyond
    // what the day number that must follow resolves.
    if w.len() == 3 || (w.len() == 4 && w == "sept") {
        let i = MONTHS.iter().position(|m| m.starts_with(w))?;
        return u32::try_from(i + 1).ok();
    }
    None
}

pub(crate) fn day_number_word(w: &str) -> Option<u32> {
    let digits = w.trim_end_matches(|c: char| c.is_alphabetic());
    let suffix = &w[digits.len()..];
    if digits.is_empty() || !matches!(suffix, "" | "st" | "nd" | "rd" | "th") {
        return None;
    }
    let d: u32 = digits.parse().ok()?;
    (1..=31).contains(&d).then_some(d)
}

/// Whether a fact-worthy entity occurs: any identifier, path, amount, date,
/// email or URL, a number that is more than a bare one- or two-digit count,
/// or a month-day date ("March 20").
pub fn has_fact_entity(text: &str) -> bool {
    let strong = entities(text).iter().any(|e| match e.kind {
        EntityKind::Number => {
            e.text.chars().any(|c| !c.is_ascii_digit()) || e.text.chars().count() > 2
        }
        EntityKind::Code => false,
        _ => true,
    });
    strong || {
        let w = words(text);
        w.windows(2).any(|p| {
            (month_number(&p[0]).is_some() && day_number_word(&p[1]).is_some())
                || (day_number_word(&p[0]).is_some() && month_number(&p[1]).is_some())
        })
    }
}
