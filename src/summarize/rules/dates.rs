//! Dates: weekdays, relative and absolute dates, deadlines resolved against a turn's time.
//! Pure functions of their input; they return slices of it, never new text.

use super::*;

pub(crate) const NANOS_PER_DAY: i64 = 86_400 * 1_000_000_000;

/// Days since 1970-01-01 of a UTC time.
pub fn day_of(t: UnixNanos) -> i64 {
    t.div_euclid(NANOS_PER_DAY)
}

pub use crate::model::calendar::{civil_from_days, days_from_civil};

/// `YYYY-MM-DD` of a day number.
pub fn format_day(z: i64) -> String {
    let (y, m, d) = civil_from_days(z);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Monday = 0 … Sunday = 6.
pub fn weekday(z: i64) -> i64 {
    // 1970-01-01 was a Thursday (3).
    (z + 3).rem_euclid(7)
}

pub(crate) fn days_in_month(y: i64, m: u32) -> u32 {
    let next = if m == 12 {
        days_from_civil(y + 1, 1, 1)
    } else {
        days_from_civil(y, m + 1, 1)
    };
    u32::try_from(next - days_from_civil(y, m, 1)).unwrap_or(31)
}

pub(crate) fn valid_date(y: i64, m: u32, d: u32) -> bool {
    (1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m)
}

pub(crate) const WEEKDAYS: &[&str] = &[
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

pub(crate) fn small_number(w: &str) -> Option<i64> {
    const NAMES: &[&str] = &[
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
        "eleven", "twelve", "thirteen", "fourteen",
    ];
    if let Some(i) = NAMES.iter().position(|n| *n == w) {
        return i64::try_from(i).ok();
    }
    if w == "a" || w == "an" {
        return Some(1);
    }
    w.parse::<i64>().ok().filter(|n| (0..=366).contains(n))
}

pub(crate) fn add_business_days(mut z: i64, n: i64) -> i64 {
    let mut left = n;
    while left > 0 {
        z += 1;
        if weekday(z) < 5 {
            left -= 1;
        }
    }
    z
}

/// Every deadline date in `text`, as `YYYY-MM-DD`, in order of appearance.
/// ISO dates are taken as written; month-day dates ("March 20", "20th of
/// March") take the turn's year, or the next year when already past;
/// relative ones are resolved against `at` (the turn's time, UTC):
/// "today"/"tonight"/"end of day" (that day), "tomorrow" (+1), "`<weekday>`"
/// or "by `<weekday>`" (the next such day, 1–7 days on), "this `<weekday>`"
/// (0–6 days on), "next `<weekday>`" (the one in the following week),
/// "in/within N days|weeks|business days", "end of (the) week" (the coming
/// Friday), "end of next week", "end of (the) month".
pub fn deadlines(text: &str, at: UnixNanos) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (_, z) in dated(text, at) {
        let s = format_day(z);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Words that, right before a date, make it the deadline of the turn
/// ("refund it today and confirm by Friday": Friday).
const DEADLINE_CUES: [&[&str]; 9] = [
    &["by"],
    &["by", "the"],
    &["before"],
    &["before", "the"],
    &["until"],
    &["till"],
    &["due"],
    &["later", "than"],
    &["deadline", "is"],
];

/// The deadline of `text`: the first date a deadline word introduces
/// ("by", "before", "until", "due", "no later than"), else the first date.
pub fn deadline(text: &str, at: UnixNanos) -> Option<String> {
    let found = dated(text, at);
    let cued = found.iter().find(|&&(pos, _)| {
        let before: Vec<String> = text[..pos]
            .split_whitespace()
            .rev()
            .take(2)
            .map(|w| w.to_lowercase())
            .collect();
        DEADLINE_CUES.iter().any(|cue| {
            cue.len() <= before.len() && cue.iter().rev().zip(&before).all(|(c, w)| c == w)
        })
    });
    cued.or(found.first()).map(|&(_, z)| format_day(z))
}

/// Every date `text` states, with its byte position, in text order.
fn dated(text: &str, at: UnixNanos) -> Vec<(usize, i64)> {
    let today = day_of(at);
    let (year, _, _) = civil_from_days(today);
    let mut found: Vec<(usize, i64)> = Vec::new();

    for (pos, tok) in raw_token_spans(text) {
        if is_iso_date(tok) {
            let y: i64 = tok[..4].parse().unwrap_or(0);
            let m: u32 = tok[5..7].parse().unwrap_or(0);
            let d: u32 = tok[8..10].parse().unwrap_or(0);
            if valid_date(y, m, d) {
                found.push((pos, days_from_civil(y, m, d)));
            }
        }
    }

    let spans = word_spans(text);
    let w: Vec<&str> = spans.iter().map(|(_, s)| s.as_str()).collect();
    let at_word = |i: usize| w.get(i).copied().unwrap_or("");
    let end_of_week = |z: i64| {
        let wd = weekday(z);
        if wd <= 4 {
            z + (4 - wd)
        } else {
            z + (11 - wd)
        }
    };
    let mut i = 0;
    while i < w.len() {
        let pos = spans[i].0;
        let mut hit: Option<(i64, usize)> = None; // (day, words consumed)
        match w[i] {
            "today" | "tonight" | "eod" => hit = Some((today, 1)),
            "tomorrow" => {
                let after = i >= 2 && w[i - 1] == "after" && w[i - 2] == "day";
                hit = Some((today + if after { 2 } else { 1 }, 1));
            }
            "eow" => hit = Some((end_of_week(today), 1)),
            "end" if at_word(i + 1) == "of" => {
                let (k, rest) = if at_word(i + 2) == "the" {
                    (i + 3, 3)
                } else {
                    (i + 2, 2)
                };
                hit = match at_word(k) {
                    "day" => Some((today, rest + 1)),
                    "week" => Some((end_of_week(today), rest + 1)),
                    "next" if at_word(k + 1) == "week" => Some((end_of_week(today) + 7, rest + 2)),
                    "month" => {
                        let (y, m, _) = civil_from_days(today);
                        Some((days_from_civil(y, m, days_in_month(y, m)), rest + 1))
                    }
                    _ => None,
                };
            }
            "in" | "within" => {
                if let Some(n) = small_number(at_word(i + 1)) {
                    let unit = at_word(i + 2);
                    hit = match unit {
                        "day" | "days" => Some((today + n, 3)),
                        "week" | "weeks" => Some((today + 7 * n, 3)),
                        "business" | "working" if matches!(at_word(i + 3), "day" | "days") => {
                            Some((add_business_days(today, n), 4))
                        }
                        _ => None,
                    };
                }
            }
            word => {
                if let Some(wd) = WEEKDAYS.iter().position(|d| *d == word) {
                    let wd = i64::try_from(wd).unwrap_or(0);
                    let ahead = (wd - weekday(today)).rem_euclid(7);
                    let prev = if i > 0 { w[i - 1] } else { "" };
                    let days = match prev {
                        "this" => ahead,
                        "next" => {
                            let upcoming = if ahead == 0 { 7 } else { ahead };
                            // In this week (before Sunday) → the week after.
                            if weekday(today) + upcoming <= 6 {
                                upcoming + 7
                            } else {
                                upcoming
                            }
                        }
                        _ => {
                            if ahead == 0 {
                                7
                            } else {
                                ahead
                            }
                        }
                    };
                    hit = Some((today + days, 1));
                } else if let Some(m) = month_number(word) {
                    if let Some(d) = day_number_word(at_word(i + 1)) {
                        let y = at_word(i + 2)
                            .parse::<i64>()
                            .ok()
                            .filter(|y| (1900..3000).contains(y));
                        hit = month_day(year, today, m, d, y).map(|z| (z, 2));
                    }
                } else if let Some(d) = day_number_word(word) {
                    let (k, used) = if at_word(i + 1) == "of" {
                        (i + 2, 3)
                    } else {
                        (i + 1, 2)
                    };
                    if let Some(m) = month_number(at_word(k)) {
                        let y = at_word(k + 1)
                            .parse::<i64>()
                            .ok()
                            .filter(|y| (1900..3000).contains(y));
                        hit = month_day(year, today, m, d, y).map(|z| (z, used));
                    }
                }
            }
        }
        match hit {
            Some((z, used)) => {
                found.push((pos, z));
                i += used.max(1);
            }
            None => i += 1,
        }
    }
    found.sort_by_key(|&(pos, _)| pos);
    found
}

pub(crate) fn month_day(
    year: i64,
    today: i64,
    m: u32,
    d: u32,
    explicit_year: Option<i64>,
) -> Option<i64> {
    if let Some(y) = explicit_year {
        return valid_date(y, m, d).then(|| days_from_civil(y, m, d));
    }
    if !valid_date(year, m, d) {
        return None;
    }
    let z = days_from_civil(year, m, d);
    if z >= today {
        Some(z)
    } else {
        valid_date(year + 1, m, d).then(|| days_from_civil(year + 1, m, d))
    }
}

pub(crate) fn raw_token_spans(text: &str) -> Vec<(usize, &str)> {
    raw_tokens(text)
        .into_iter()
        .map(|t| {
            // Every token is a slice of `text`; its offset is pointer
            // arithmetic on the same allocation.
            (t.as_ptr() as usize - text.as_ptr() as usize, t)
        })
        .collect()
}
