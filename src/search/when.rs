//! Dates named in a query, resolved to a period: "in May 2023", "last
//! May", "in 2022", "yesterday", "last week", "two weeks ago",
//! "2023-05-08", "8 May 2023". A month without a year is the newest such
//! month not after the reference time (the newest turn of the session a
//! bundle is built for, or now). Only the first date found counts; a query
//! without one has no period.
//!
//! The needs are narrow (a period to favour, never a filter), so this is a
//! small table of English forms rather than a natural-language date crate.

use crate::model::calendar::{civil_from_days, days_from_civil, MONTH_NAMES};
use crate::model::UnixNanos;

const DAY: u64 = 86_400;

fn month(word: &str) -> Option<u32> {
    MONTH_NAMES
        .iter()
        .map(|m| m.to_ascii_lowercase())
        .position(|m| m == word || (word.len() == 3 && m.starts_with(word) && word != "may"))
        .or_else(|| (word == "may").then_some(4))
        .map(|i| i as u32 + 1)
}

fn year(word: &str) -> Option<i64> {
    let y: i64 = word.parse().ok()?;
    (word.len() == 4 && (1900..=2200).contains(&y)).then_some(y)
}

fn count(word: &str) -> Option<u64> {
    const WORDS: [&str; 10] = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    match word {
        "a" | "an" => Some(1),
        "few" | "couple" => Some(2),
        _ => word
            .parse()
            .ok()
            .filter(|n| (1..=99).contains(n))
            .or_else(|| WORDS.iter().position(|w| *w == word).map(|i| i as u64 + 1)),
    }
}

fn day_start(y: i64, m: u32, d: u32) -> u64 {
    u64::try_from(days_from_civil(y, m, d)).unwrap_or(0) * DAY
}

fn month_period(y: i64, m: u32) -> (u64, u64) {
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (day_start(y, m, 1), day_start(ny, nm, 1))
}

/// A date written in digits: 2023-05-08, 19.01.2024 (day first), 1/19/2024
/// (month first unless the first number cannot be a month).
fn numeric_date(w: &str) -> Option<(i64, u32, u32)> {
    let sep = ['-', '.', '/'].into_iter().find(|&c| w.contains(c))?;
    let parts: Vec<&str> = w.split(sep).collect();
    let [a, b, c] = parts[..] else { return None };
    let num = |x: &str| x.parse::<u32>().ok();
    let (y, m, d) = match sep {
        '-' => (year(a)?, num(b)?, num(c)?),
        '.' => (year(c)?, num(b)?, num(a)?),
        _ => {
            let (a, b) = (num(a)?, num(b)?);
            if a > 12 {
                (year(c)?, b, a)
            } else {
                (year(c)?, a, b)
            }
        }
    };
    ((1..=12).contains(&m) && (1..=31).contains(&d)).then_some((y, m, d))
}

/// The period `query` names, in seconds since the epoch `[from, to)`,
/// resolved against `reference` (nanoseconds; `None` = now).
pub fn period(query: &str, reference: Option<UnixNanos>) -> Option<(u64, u64)> {
    let now = reference.unwrap_or_else(crate::model::now_nanos);
    let today = now.div_euclid(1_000_000_000 * DAY as i64);
    let (ty, tm, _) = civil_from_days(today);
    let today_start = u64::try_from(today).unwrap_or(0) * DAY;
    let lower = query.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || matches!(c, '-' | '.' | '/')))
        .map(|w| w.trim_matches(|c| matches!(c, '-' | '.' | '/')))
        .filter(|w| !w.is_empty())
        .collect();
    for (i, w) in words.iter().enumerate() {
        let next = words.get(i + 1).copied().unwrap_or("");
        let prev = if i > 0 { words[i - 1] } else { "" };
        if let Some((y, m, d)) = numeric_date(w) {
            let from = day_start(y, m, d);
            return Some((from, from + DAY));
        }
        match *w {
            "yesterday" => return Some((today_start.saturating_sub(DAY), today_start)),
            "today" | "tonight" => return Some((today_start, today_start + DAY)),
            "week" | "month" | "year" if prev == "last" => {
                let span = match *w {
                    "week" => 7 * DAY,
                    "month" => 31 * DAY,
                    _ => 366 * DAY,
                };
                return Some((today_start.saturating_sub(span), today_start));
            }
            "ago" => {
                // "two weeks ago": the unit before, the count before that.
                let unit = prev.trim_end_matches('s');
                let n = words
                    .get(i.wrapping_sub(2))
                    .and_then(|w| count(w))
                    .unwrap_or(1);
                let span = match unit {
                    "day" => DAY,
                    "week" => 7 * DAY,
                    "month" => 30 * DAY,
                    "year" => 365 * DAY,
                    _ => continue,
                };
                let centre = today_start.saturating_sub(n * span);
                // Loose on purpose: people round.
                return Some((centre.saturating_sub(span), centre + span));
            }
            _ => {}
        }
        if let Some(m) = month(w) {
            // "8 May 2023", "May 8, 2023", "May 2023", "last May", "in May".
            let day_of = |w: &str| w.parse::<u32>().ok().filter(|d| (1..=31).contains(d));
            let (day, after) = match (day_of(prev), day_of(next)) {
                (Some(d), _) => (Some(d), next),
                (None, Some(d)) => (Some(d), words.get(i + 2).copied().unwrap_or("")),
                (None, None) => (None, next),
            };
            let y = year(after).unwrap_or(if m > tm || (prev == "last" && m == tm) {
                ty - 1
            } else {
                ty
            });
            // A three-letter month ("mar", "jun") stands alone only with a
            // day or year next to it.
            if w.len() == 3 && *w != "may" && day.is_none() && year(after).is_none() {
                continue;
            }
            // "may" is also a verb: only with a day, a year, or "in"/"last".
            if *w == "may"
                && day.is_none()
                && year(after).is_none()
                && !matches!(prev, "in" | "last" | "early" | "late" | "mid")
            {
                continue;
            }
            return Some(match day {
                Some(d) => {
                    let from = day_start(y, m, d);
                    (from, from + DAY)
                }
                None => month_period(y, m),
            });
        }
        if let Some(y) = year(w) {
            return Some((day_start(y, 1, 1), day_start(y + 1, 1, 1)));
        }
    }
    None
}

/// Words that say when something happened, the kind of answer a question
/// asking "when" wants: "I had an exam today", "we made it a week ago".
const TIME_WORDS: &str =
    "today yesterday tonight tomorrow ago recently last week weekend month year morning night";

/// The time words a question asking when something happened is answered
/// by (empty for any other question). They rank a record a little higher,
/// never decide a match (`query.rs`).
pub fn answer_cues(query: &str) -> &'static str {
    let q = query.trim_start().to_lowercase();
    let asks = q.starts_with("when ")
        || q.starts_with("since when ")
        || [
            "how long ago",
            "what date",
            "what day",
            "what month",
            "what year",
            "what time",
        ]
        .iter()
        .any(|p| q.starts_with(p) || q.contains(&format!(" {p}")));
    if asks {
        TIME_WORDS
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i64, m: u32, d: u32) -> Option<UnixNanos> {
        Some(days_from_civil(y, m, d) * 86_400 * 1_000_000_000 + 3_600 * 1_000_000_000)
    }

    type Day = (i64, u32, u32);

    fn days(p: Option<(u64, u64)>) -> Option<(Day, Day)> {
        p.map(|(a, b)| {
            (
                civil_from_days((a / DAY) as i64),
                civil_from_days((b / DAY) as i64),
            )
        })
    }

    #[test]
    fn months_resolve_to_the_newest_not_after_the_reference() {
        let r = at(2023, 8, 20);
        assert_eq!(
            days(period("what did she do in May?", r)),
            Some(((2023, 5, 1), (2023, 6, 1)))
        );
        assert_eq!(
            days(period("plans for last December", r)),
            Some(((2022, 12, 1), (2023, 1, 1)))
        );
        assert_eq!(
            days(period("trip in September 2021", r)),
            Some(((2021, 9, 1), (2021, 10, 1)))
        );
        assert_eq!(
            days(period("on 8 May 2023", r)),
            Some(((2023, 5, 8), (2023, 5, 9)))
        );
        assert_eq!(
            days(period("the 2023-05-08 call", r)),
            Some(((2023, 5, 8), (2023, 5, 9)))
        );
        for q in [
            "what did she cook on 19.01.2024?",
            "on 1/19/2024",
            "on 19/1/2024",
            "on 19 Jan 2024",
            "January 19, 2024",
        ] {
            assert_eq!(
                days(period(q, r)),
                Some(((2024, 1, 19), (2024, 1, 20))),
                "{q}"
            );
        }
    }

    #[test]
    fn relative_periods_and_years() {
        let r = at(2023, 8, 20);
        assert_eq!(
            days(period("what happened yesterday", r)),
            Some(((2023, 8, 19), (2023, 8, 20)))
        );
        assert_eq!(
            days(period("in 2022", r)),
            Some(((2022, 1, 1), (2023, 1, 1)))
        );
        let (a, b) = period("two weeks ago", r).unwrap();
        assert!(a < b && b <= days_from_civil(2023, 8, 20) as u64 * DAY);
    }

    #[test]
    fn words_that_only_look_like_dates_are_not_dates() {
        let r = at(2023, 8, 20);
        assert_eq!(period("may I ask about the refund", r), None);
        assert_eq!(period("mar the surface", r), None);
        assert_eq!(period("job 123456 failed", r), None);
        assert_eq!(period("what is her dog called", r), None);
    }

    #[test]
    fn questions_asking_when_want_time_words() {
        for q in [
            "When did Kate start skiing?",
            "On what date did the build fail?",
            "how long ago was the trip",
        ] {
            assert!(answer_cues(q).contains("yesterday"), "{q}");
        }
        for q in ["What did Kate cook?", "Where was the party?", "whenever"] {
            assert_eq!(answer_cues(q), "", "{q}");
        }
    }
}
