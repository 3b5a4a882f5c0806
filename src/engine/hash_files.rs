//! `hashFiles(pattern, …)` as GitHub Actions defines it, for a `cache.key`:
//! the SHA-256 of the SHA-256 of every regular file the glob patterns
//! match (`*` and `?` within a name, `**` across folders, `[…]`; a pattern
//! starting with `!` leaves out what it matches), relative to the step's
//! working directory, in path order; empty when no file matches. Run by
//! the driver, which answers the scheduler with the hashes (the scheduler
//! reads no file). Globs are globset's, the walk walkdir's.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// The hash of the files under `dir` that `patterns` match, or why it
/// could not be made (a bad pattern, a file that cannot be read).
pub fn hash(dir: &Path, patterns: &[String]) -> Result<String, String> {
    let mut include = GlobSetBuilder::new();
    let mut exclude = GlobSetBuilder::new();
    for p in patterns {
        let (set, p) = match p.strip_prefix('!') {
            Some(rest) => (&mut exclude, rest),
            None => (&mut include, p.as_str()),
        };
        let p = p.trim_start_matches("./");
        let glob = GlobBuilder::new(p)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("hashFiles: pattern `{p}`: {e}"))?;
        set.add(glob);
    }
    let built = |b: GlobSetBuilder| -> Result<GlobSet, String> {
        b.build().map_err(|e| format!("hashFiles: {e}"))
    };
    let (include, exclude) = (built(include)?, built(exclude)?);
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(dir).follow_links(false) {
        let entry = entry.map_err(|e| format!("hashFiles: {e}"))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(dir) else {
            continue;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        if include.is_match(&rel) && !exclude.is_match(&rel) {
            files.push((rel, entry.into_path()));
        }
    }
    if files.is_empty() {
        return Ok(String::new());
    }
    files.sort();
    let mut all = Sha256::new();
    for (rel, path) in files {
        let mut file =
            std::fs::File::open(&path).map_err(|e| format!("hashFiles: cannot read {rel}: {e}"))?;
        let mut one = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = file
                .read(&mut buf)
                .map_err(|e| format!("hashFiles: cannot read {rel}: {e}"))?;
            if n == 0 {
                break;
            }
            one.update(&buf[..n]);
        }
        all.update(one.finalize());
    }
    Ok(hex::encode(all.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching_files_are_hashed_in_path_order_and_none_gives_empty() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("src/deep")).unwrap();
        std::fs::write(d.path().join("src/a.rs"), "a").unwrap();
        std::fs::write(d.path().join("src/deep/b.rs"), "b").unwrap();
        std::fs::write(d.path().join("src/deep/b.test.rs"), "t").unwrap();
        std::fs::write(d.path().join("Cargo.lock"), "l").unwrap();
        let p = |v: &[&str]| v.iter().map(|s| (*s).to_string()).collect::<Vec<_>>();
        let h = |v: &[&str]| hash(d.path(), &p(v)).unwrap();
        // GitHub's: sha256 of the concatenated sha256 digests.
        let digest = |parts: &[&str]| {
            let mut all = Sha256::new();
            for part in parts {
                all.update(Sha256::digest(part.as_bytes()));
            }
            hex::encode(all.finalize())
        };
        assert_eq!(h(&["src/**", "Cargo.lock"]), digest(&["l", "a", "b", "t"]));
        assert_eq!(
            h(&["src/**/*.rs", "!src/**/*.test.rs"]),
            digest(&["a", "b"])
        );
        assert_eq!(
            h(&["src/*.rs"]),
            digest(&["a"]),
            "`*` stays within a folder"
        );
        assert_eq!(h(&["nothing/**"]), "");
        std::fs::write(d.path().join("src/a.rs"), "changed").unwrap();
        assert_ne!(h(&["src/**"]), digest(&["a", "b", "t"]));
    }
}
