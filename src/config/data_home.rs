//! The per-user data directory that `mnemo mcp --embedded` uses when no
//! `--data-dir` is given: the platform's data home, as desktop tools use
//! it. Only paths are computed here; nothing is created.

use std::path::PathBuf;

/// The directory's name inside the platform's data home.
const APP: &str = "mnemo";

/// `$XDG_DATA_HOME/mnemo`, else `~/.local/share/mnemo` (Linux and other
/// Unix); `~/Library/Application Support/mnemo` (macOS);
/// `%LOCALAPPDATA%\mnemo` (Windows: the store is per machine, not
/// roaming). `None` when the home directory is unknown.
pub fn user_data_dir() -> Option<PathBuf> {
    from_env(|k| std::env::var_os(k))
}

fn from_env(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    // An empty or relative value is ignored, as the XDG spec says.
    let absolute = |k: &str| var(k).map(PathBuf::from).filter(|p| p.is_absolute());
    if cfg!(windows) {
        return absolute("LOCALAPPDATA").map(|p| p.join(APP));
    }
    if cfg!(target_os = "macos") {
        return absolute("HOME").map(|h| h.join("Library/Application Support").join(APP));
    }
    absolute("XDG_DATA_HOME")
        .map(|p| p.join(APP))
        .or_else(|| absolute("HOME").map(|h| h.join(".local/share").join(APP)))
}

#[cfg(all(test, unix, not(target_os = "macos")))]
mod tests {
    use super::*;

    fn env<'a>(
        pairs: &'a [(&'a str, &'a str)],
    ) -> impl Fn(&str) -> Option<std::ffi::OsString> + 'a {
        move |k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.into())
    }

    #[test]
    fn xdg_data_home_wins_over_home() {
        let got = from_env(env(&[("XDG_DATA_HOME", "/x/data"), ("HOME", "/home/u")]));
        assert_eq!(got, Some(PathBuf::from("/x/data/mnemo")));
    }

    #[test]
    fn home_local_share_otherwise_and_relative_values_ignored() {
        let got = from_env(env(&[("XDG_DATA_HOME", "rel"), ("HOME", "/home/u")]));
        assert_eq!(got, Some(PathBuf::from("/home/u/.local/share/mnemo")));
        assert_eq!(from_env(env(&[("HOME", "")])), None);
    }
}
