//! Stamps the build with its git commit (`AGENTCRON_COMMIT`, read by
//! `agentcron::COMMIT`): `--version` and `status` then tell two builds apart.
//! Without git, or outside a checkout, the commit is "unknown".

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=AGENTCRON_COMMIT={commit}");
    // A new commit moves HEAD (a detached checkout) or the branch it names; in
    // a worktree HEAD is under the worktree's git dir and the branch under the
    // common one. Only existing paths: cargo reruns every build for a missing one.
    let mut watch: Vec<PathBuf> = vec![];
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch.push(PathBuf::from(&dir).join("HEAD"));
    }
    if let (Some(common), Some(head_ref)) = (
        git(&["rev-parse", "--git-common-dir"]),
        git(&["symbolic-ref", "-q", "HEAD"]),
    ) {
        watch.push(PathBuf::from(&common).join(&head_ref));
        watch.push(PathBuf::from(&common).join("packed-refs"));
    }
    for p in watch.into_iter().filter(|p| p.exists()) {
        println!("cargo:rerun-if-changed={}", p.display());
    }
}
