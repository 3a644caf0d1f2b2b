//! Opaque page tokens. A token is hex text so clients treat it as opaque;
//! inside it is a kind tag and the position to resume from. A token that
//! does not decode is `INVALID_ARGUMENT`.

use crate::error::{Error, Result};

/// Where a paginated listing resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageToken {
    /// Sessions: continue after this session id.
    SessionsAfter(String),
    /// Turns: continue at this seq.
    TurnsFrom(u64),
    /// Summaries (newest first): continue at this version and below.
    SummariesAtMost(u64),
    /// Audit log: continue after this audit seq.
    AuditAfter(u64),
    /// Review queue: continue after this review id.
    ReviewsAfter(String),
    /// Facts: continue after this fact id.
    FactsAfter(String),
    /// Episodes (newest first): continue after this end time and session.
    EpisodesAfter(i64, String),
    /// Erasure records: continue after this erasure id.
    ErasuresAfter(String),
}

impl PageToken {
    /// The opaque text form.
    pub fn encode(&self) -> String {
        let raw = match self {
            PageToken::SessionsAfter(id) => format!("s1:{id}"),
            PageToken::TurnsFrom(seq) => format!("t1:{seq}"),
            PageToken::SummariesAtMost(v) => format!("m1:{v}"),
            PageToken::AuditAfter(n) => format!("a1:{n}"),
            PageToken::ReviewsAfter(id) => format!("r1:{id}"),
            PageToken::FactsAfter(id) => format!("f1:{id}"),
            PageToken::EpisodesAfter(t, id) => format!("e1:{t}:{id}"),
            PageToken::ErasuresAfter(id) => format!("z1:{id}"),
        };
        hex::encode(raw)
    }

    /// Parses a token; `None` for the empty (first-page) token.
    pub fn decode(token: &str) -> Result<Option<PageToken>> {
        if token.is_empty() {
            return Ok(None);
        }
        let bad = || Error::invalid("page_token is not a token this server issued");
        if token.len() % 2 != 0 || token.len() > 512 {
            return Err(bad());
        }
        // Slicing by byte offsets would panic inside a multi-byte
        // character; the decoder rejects anything but hex digits.
        let bytes = hex::decode(token).map_err(|_| bad())?;
        let raw = String::from_utf8(bytes).map_err(|_| bad())?;
        if let Some(id) = raw.strip_prefix("s1:") {
            return Ok(Some(PageToken::SessionsAfter(id.to_owned())));
        }
        if let Some(seq) = raw.strip_prefix("t1:") {
            return seq
                .parse()
                .map(|s| Some(PageToken::TurnsFrom(s)))
                .map_err(|_| bad());
        }
        if let Some(v) = raw.strip_prefix("m1:") {
            return v
                .parse()
                .map(|v| Some(PageToken::SummariesAtMost(v)))
                .map_err(|_| bad());
        }
        if let Some(n) = raw.strip_prefix("a1:") {
            return n
                .parse()
                .map(|n| Some(PageToken::AuditAfter(n)))
                .map_err(|_| bad());
        }
        if let Some(id) = raw.strip_prefix("r1:") {
            return Ok(Some(PageToken::ReviewsAfter(id.to_owned())));
        }
        if let Some(id) = raw.strip_prefix("f1:") {
            return Ok(Some(PageToken::FactsAfter(id.to_owned())));
        }
        if let Some(id) = raw.strip_prefix("z1:") {
            return Ok(Some(PageToken::ErasuresAfter(id.to_owned())));
        }
        if let Some(rest) = raw.strip_prefix("e1:") {
            let (t, id) = rest.split_once(':').ok_or_else(bad)?;
            let t = t.parse().map_err(|_| bad())?;
            return Ok(Some(PageToken::EpisodesAfter(t, id.to_owned())));
        }
        Err(bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_reject_garbage() {
        for t in [
            PageToken::SessionsAfter("01ABC".into()),
            PageToken::TurnsFrom(42),
            PageToken::FactsAfter("01F".into()),
            PageToken::EpisodesAfter(-5, "s:1".into()),
            PageToken::ErasuresAfter("01Z".into()),
        ] {
            assert_eq!(PageToken::decode(&t.encode()).unwrap(), Some(t));
        }
        assert_eq!(PageToken::decode("").unwrap(), None);
        for bad in ["zz", "abc", "7831", &"00".repeat(300), "aéb", "éé"] {
            assert!(
                matches!(PageToken::decode(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }
}
