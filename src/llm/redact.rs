//! PII redaction before text leaves for a model: emails, phone numbers,
//! payment card numbers (Luhn-checked, and written like a card or next to
//! a word about cards: a ticket number `220-4455667788` that happens to
//! pass the checksum stays), IBANs, IP addresses and configured
//! patterns become stable placeholders (`⟦EMAIL_1⟧`: the same value, the
//! same placeholder, within one fold), restored in the answer before it is
//! validated. A placeholder in the answer that was never sent is the
//! model's invention, and fails the fold.

use std::collections::BTreeMap;

use regex::Regex;

/// The patterns, compiled once.
pub struct Redactor {
    kinds: Vec<(&'static str, Regex)>,
    custom: Vec<Regex>,
    placeholder: Regex,
}

/// Values replaced during one fold, both ways.
#[derive(Debug, Default, Clone)]
pub struct Placeholders {
    by_value: BTreeMap<String, String>,
    by_placeholder: BTreeMap<String, String>,
    counts: BTreeMap<&'static str, usize>,
}

impl Placeholders {
    fn name(&mut self, kind: &'static str, value: &str) -> String {
        if let Some(p) = self.by_value.get(value) {
            return p.clone();
        }
        let n = self.counts.entry(kind).or_insert(0);
        *n += 1;
        let p = format!("⟦{kind}_{n}⟧");
        self.by_value.insert(value.to_owned(), p.clone());
        self.by_placeholder.insert(p.clone(), value.to_owned());
        p
    }

    /// How many values were replaced.
    pub fn len(&self) -> usize {
        self.by_value.len()
    }

    /// Whether nothing was replaced.
    pub fn is_empty(&self) -> bool {
        self.by_value.is_empty()
    }
}

fn luhn(digits: &str) -> bool {
    let ds: Vec<u32> = digits.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&ds.len()) {
        return false;
    }
    let sum: u32 = ds
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                let x = d * 2;
                if x > 9 {
                    x - 9
                } else {
                    x
                }
            } else {
                d
            }
        })
        .sum();
    sum % 10 == 0
}

/// Words that make a number nearby a card number.
const CARD_WORDS: [&str; 9] = [
    "card",
    "visa",
    "mastercard",
    "amex",
    "credit",
    "debit",
    "cc",
    "pan",
    "maestro",
];

/// How far before a number a card word counts (bytes).
const CARD_CONTEXT_BYTES: usize = 40;

/// Whether `number` is written the way card numbers are: one run of 15 or
/// 16 digits, or groups of four (the last one to four digits), or 4-6-5 /
/// 4-6-4 (American Express, Diners).
fn card_shaped(number: &str) -> bool {
    let groups: Vec<usize> = number
        .split([' ', '-'])
        .filter(|g| !g.is_empty())
        .map(str::len)
        .collect();
    match groups.as_slice() {
        [n] => (15..=16).contains(n),
        [4, 6, 4] | [4, 6, 5] => true,
        [first @ .., last] => {
            first.len() >= 3 && first.iter().all(|&g| g == 4) && (1..=4).contains(last)
        }
        [] => false,
    }
}

/// Whether a word about cards stands shortly before `at` in `text`.
fn card_context(text: &str, at: usize) -> bool {
    let mut from = at.saturating_sub(CARD_CONTEXT_BYTES);
    while !text.is_char_boundary(from) {
        from -= 1;
    }
    text[from..at]
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| CARD_WORDS.iter().any(|k| w.eq_ignore_ascii_case(k)))
}

impl Redactor {
    /// The built-in patterns plus `custom` (already validated regexes).
    pub fn new(custom: &[String]) -> Result<Redactor, regex::Error> {
        let kinds = vec![
            (
                "EMAIL",
                Regex::new(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")?,
            ),
            (
                "IBAN",
                Regex::new(r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")?,
            ),
            ("CARD", Regex::new(r"\b(?:\d[ -]?){12,18}\d\b")?),
            (
                "IP",
                Regex::new(
                    r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b|\b(?:[0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}\b",
                )?,
            ),
            (
                "PHONE",
                Regex::new(
                    r"(?:\+\d{1,3}[ .-]?)?(?:\(\d{2,4}\)[ .-]?)?\d{2,4}[ .-]\d{3,4}[ .-]?\d{3,4}\b",
                )?,
            ),
        ];
        let custom = custom
            .iter()
            .map(|p| Regex::new(p))
            .collect::<Result<_, _>>()?;
        Ok(Redactor {
            kinds,
            custom,
            placeholder: Regex::new(r"⟦[A-Z]+_\d+⟧")?,
        })
    }

    /// `text` with every match replaced by its placeholder.
    pub fn redact(&self, text: &str, names: &mut Placeholders) -> String {
        let mut out = text.to_owned();
        for (kind, re) in &self.kinds {
            out = re
                .replace_all(&out, |c: &regex::Captures<'_>| {
                    let v = &c[0];
                    if *kind == "CARD" {
                        let at = c.get(0).map_or(0, |m| m.start());
                        let card = luhn(v) && (card_shaped(v) || card_context(&out, at));
                        if !card {
                            return v.to_owned();
                        }
                    }
                    names.name(kind, v)
                })
                .into_owned();
        }
        for re in &self.custom {
            out = re
                .replace_all(&out, |c: &regex::Captures<'_>| {
                    names.name("REDACTED", &c[0])
                })
                .into_owned();
        }
        out
    }

    /// `text` with the placeholders put back; `Err` names the placeholders
    /// that were never sent.
    pub fn restore(&self, text: &str, names: &Placeholders) -> Result<String, Vec<String>> {
        let invented: Vec<String> = self
            .placeholder
            .find_iter(text)
            .map(|m| m.as_str().to_owned())
            .filter(|p| !names.by_placeholder.contains_key(p))
            .collect();
        if !invented.is_empty() {
            return Err(invented);
        }
        Ok(self
            .placeholder
            .replace_all(text, |c: &regex::Captures<'_>| {
                names.by_placeholder[&c[0]].clone()
            })
            .into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personal_data_is_replaced_stably_and_restored() {
        let r = Redactor::new(&["ACCT-\\d{6}".to_owned()]).unwrap();
        let mut names = Placeholders::default();
        let text = "Mail jane.doe@example.com or call +1 415-555-0132; card 4111 1111 1111 1111, \
                    IBAN DE89 3704 0044 0532 0130 00, host 10.0.0.12, account ACCT-123456. \
                    Again: jane.doe@example.com. Order ORD-7731 for $84.50 on 2026-11-28.";
        let sent = r.redact(text, &mut names);
        for secret in [
            "jane.doe@example.com",
            "415-555-0132",
            "4111 1111 1111 1111",
            "DE89",
            "10.0.0.12",
            "ACCT-123456",
        ] {
            assert!(!sent.contains(secret), "{secret} left in {sent}");
        }
        // Identifiers, amounts and dates that are not personal data stay.
        for kept in ["ORD-7731", "$84.50", "2026-11-28"] {
            assert!(sent.contains(kept), "{kept} lost in {sent}");
        }
        assert_eq!(sent.matches("⟦EMAIL_1⟧").count(), 2);
        assert_eq!(r.restore(&sent, &names).unwrap(), text);
        assert_eq!(
            r.restore("see ⟦EMAIL_7⟧", &names).unwrap_err(),
            vec!["⟦EMAIL_7⟧".to_owned()]
        );
    }

    #[test]
    fn a_ticket_number_passing_the_checksum_is_not_a_card() {
        let r = Redactor::new(&[]).unwrap();
        assert!(luhn("220-4455667788"), "the case needs a Luhn-valid number");
        let mut names = Placeholders::default();
        let text = "Ticket 220-4455667788 is open; order 4111111111111111 shipped";
        let sent = r.redact(text, &mut names);
        assert!(sent.contains("220-4455667788"), "{sent}");
        // A 16-digit run is card-shaped whatever the words around it.
        assert!(!sent.contains("4111111111111111"), "{sent}");
        // The same ticket-like digits after a word about cards are a card.
        let sent = r.redact("my card number is 220-4455667788", &mut names);
        assert!(!sent.contains("4455667788"), "{sent}");
        assert!(card_shaped("4111 1111 1111 1111") && card_shaped("3782-822463-10005"));
        assert!(!card_shaped("220-4455667788") && !card_shaped("1234567890123"));
    }

    #[test]
    fn numbers_that_fail_luhn_are_not_cards() {
        let r = Redactor::new(&[]).unwrap();
        let mut names = Placeholders::default();
        assert!(r
            .redact("build 1234567890123", &mut names)
            .contains("1234567890123"));
    }
}
