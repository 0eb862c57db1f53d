//! `combine`: the reduce step after several build machines each split their shard
//! (workflows §3). Input: the output directories of `split` (one per shard), each
//! holding `<component>_generic` and `<component>_<target>` artifacts. Output: one
//! generic artifact per component and the target artifacts of every shard (one per
//! target, or one per configured group).
//!
//! Unlike the reference, which takes the primary shard's generic part and checks
//! nothing, combine proves that the shards fit together before writing anything:
//! * every generic file other than a host-only binary is byte-identical in every
//!   shard, and so is every symlink's text;
//! * every host-only binary is in every shard, with the same marker and the same
//!   bundle indices (host code itself may differ between shards built for different
//!   targets: the first shard's copy is taken);
//! * a target delivered by two shards is byte-identical in both;
//! * every archive reads back, serves exactly its artifact's target, and holds only
//!   kernels of binaries of the generic artifact.
//!
//! Differences are listed (artifact, file, what, first differing offset) and refused,
//! unless `prefer` names the shard whose copy wins.

use super::combine_plan::{Holders, OutPlan, Shard, load_shards, plan_outputs};
use super::manifest::{MANIFEST, manifest_text, read_manifest};
use crate::error::{Error, Result};
use crate::fsutil;
use crate::kpack::archive::Archive;
use crate::relpath::to_path;
use crate::scan::{self, FileKind};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

/// A group of targets combined into one artifact (`<component>_<group>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TargetGroup {
    /// The group key (artifact suffix).
    pub name: String,
    /// A display name (defaults to the key).
    pub display_name: String,
    /// Its targets, in order.
    pub architectures: Vec<String>,
}

/// The reference's packaging configuration (workflows §3.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CombineConfig {
    /// The shard whose generic artifacts the reference takes.
    pub primary_shard: String,
    /// Groups, in file order.
    pub groups: Vec<TargetGroup>,
}

/// Largest configuration file read.
const MAX_CONFIG_BYTES: u64 = 4 << 20;

impl CombineConfig {
    /// Read and check a configuration file.
    pub fn read(path: &Path) -> Result<CombineConfig> {
        let bad = |what: String| Error::Usage(format!("{}: {what}", path.display()));
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.len() == 0 {
            return Err(bad("configuration file is empty".into()));
        }
        if meta.len() > MAX_CONFIG_BYTES {
            return Err(bad(format!("larger than {MAX_CONFIG_BYTES} bytes")));
        }
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        CombineConfig::parse(&text).map_err(bad)
    }

    /// Parse configuration JSON.
    pub fn parse(text: &[u8]) -> std::result::Result<CombineConfig, String> {
        use serde_json::Value;
        let v: Value = serde_json::from_slice(text).map_err(|e| format!("invalid JSON: {e}"))?;
        let obj = v.as_object().ok_or("not a JSON object")?;
        let primary = match obj.get("primary_shard") {
            None => return Err("missing field primary_shard".into()),
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(_) => return Err("primary_shard must be a non-empty string".into()),
        };
        let groups = obj
            .get("architecture_groups")
            .ok_or("missing field architecture_groups")?
            .as_object()
            .ok_or("architecture_groups must be an object")?;
        if groups.is_empty() {
            return Err("architecture_groups is empty".into());
        }
        if let Some(v) = obj.get("validation")
            && !v.is_object()
        {
            return Err("validation must be an object".into());
        }
        let mut out = Vec::new();
        for (name, g) in groups {
            let g = g
                .as_object()
                .ok_or_else(|| format!("group {name}: not an object"))?;
            let archs = g
                .get("architectures")
                .ok_or_else(|| format!("group {name}: missing architectures"))?
                .as_array()
                .ok_or_else(|| format!("group {name}: architectures must be a list"))?;
            if archs.is_empty() {
                return Err(format!("group {name}: architectures is empty"));
            }
            let mut architectures = Vec::new();
            for a in archs {
                let a = a
                    .as_str()
                    .ok_or_else(|| format!("group {name}: architectures must be strings"))?;
                if !a.starts_with("gfx") {
                    return Err(format!(
                        "group {name}: architecture {a:?} must start with 'gfx'"
                    ));
                }
                architectures.push(a.to_string());
            }
            super::split::check_name("group", name).map_err(|e| e.to_string())?;
            out.push(TargetGroup {
                name: name.clone(),
                display_name: g
                    .get("display_name")
                    .and_then(Value::as_str)
                    .unwrap_or(name)
                    .to_string(),
                architectures,
            });
        }
        Ok(CombineConfig {
            primary_shard: primary,
            groups: out,
        })
    }
}

/// How to combine.
#[derive(Debug, Clone, Default)]
pub struct CombineOptions {
    /// Target groups; `None`: one output artifact per target.
    pub config: Option<CombineConfig>,
    /// The shard (its path as given, or its directory name) whose copy wins where
    /// shards differ; `None` refuses any difference.
    pub prefer: Option<String>,
    /// Replace output artifacts that exist.
    pub force: bool,
}

/// One difference between shards.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Difference {
    /// The artifact (`blas_lib_generic`, `blas_lib_gfx942`).
    pub artifact: String,
    /// The file inside it.
    pub path: String,
    /// The shard that differs from the first one holding the file.
    pub shard: String,
    /// What differs.
    pub what: String,
    /// First differing byte, for files of different content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/{} in {}: {}",
            self.artifact, self.path, self.shard, self.what
        )?;
        if let Some(o) = self.offset {
            write!(f, " (first difference at byte {o})")?;
        }
        Ok(())
    }
}

/// A combined output artifact.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CombinedArtifact {
    /// Directory name.
    pub name: String,
    /// The targets in it, each with the shard it came from.
    pub targets: BTreeMap<String, String>,
    /// Its manifest.
    pub prefixes: Vec<String>,
    /// Files and symlinks.
    pub files: u64,
}

/// What a combine did.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct CombineReport {
    /// The shards, as given.
    pub shards: Vec<PathBuf>,
    /// Output directory.
    pub output: PathBuf,
    /// Components found (generic artifacts).
    pub components: Vec<String>,
    /// Artifacts written.
    pub artifacts: Vec<CombinedArtifact>,
    /// Targets of groups that no shard delivered, per output artifact.
    pub missing: BTreeMap<String, Vec<String>>,
    /// Differences overridden by `prefer`.
    pub differences: Vec<Difference>,
    /// Archives checked.
    pub archives: u64,
    /// Code objects in them.
    pub code_objects: u64,
    /// Bytes written.
    pub bytes_out: u64,
    /// Things worth telling (outputs placed one by one where one switch was not
    /// possible).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// An artifact directory name: `(component, None)` for `<c>_generic`, `(component,
/// Some(target))` for `<c>_gfx…`; anything else is not an artifact.
pub fn parse_artifact_name(name: &str) -> Option<(String, Option<String>)> {
    if let Some(c) = name.strip_suffix("_generic") {
        return (!c.is_empty()).then(|| (c.to_string(), None));
    }
    let (c, t) = name.rsplit_once('_')?;
    (!c.is_empty() && t.starts_with("gfx")).then(|| (c.to_string(), Some(t.to_string())))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Dir,
    File(u64),
    Symlink(PathBuf),
}

/// Every entry below `root`, relative, in the walk's order (each directory's names
/// sorted, its entries after it: the order of [`Path`]'s comparison, by components);
/// symlinks not followed. Streamed: a shard's 40,000 files are never listed whole.
/// Each entry comes with its relative path as the system names it (to order by).
fn walk(root: &Path) -> impl Iterator<Item = Result<(String, Entry, PathBuf)>> + '_ {
    walkdir::WalkDir::new(root)
        .min_depth(1)
        .sort_by_file_name()
        .into_iter()
        .map(move |e| walked(root, e))
}

fn walked(root: &Path, e: walkdir::Result<walkdir::DirEntry>) -> Result<(String, Entry, PathBuf)> {
    let e = e.map_err(|e| {
        let p = e.path().unwrap_or(root).to_path_buf();
        Error::io(
            &p,
            e.into_io_error()
                .unwrap_or_else(|| std::io::Error::other("walk")),
        )
    })?;
    let raw = e
        .path()
        .strip_prefix(root)
        .map_err(|_| Error::Internal(format!("{}: outside its root", e.path().display())))?;
    // Exact text (bytes that are not UTF-8 escaped), never a lossy spelling.
    let rel = crate::relpath::encode(raw).map_err(|why| Error::Unsupported {
        path: e.path().to_path_buf(),
        what: why.to_string(),
    })?;
    let ft = e.file_type();
    let entry = if ft.is_symlink() {
        Entry::Symlink(std::fs::read_link(e.path()).map_err(|err| Error::io(e.path(), err))?)
    } else if ft.is_dir() {
        Entry::Dir
    } else if ft.is_file() {
        Entry::File(e.metadata().map(|m| m.len()).unwrap_or(0))
    } else {
        return Err(Error::Unsupported {
            path: e.path().to_path_buf(),
            what: "special file in a shard".into(),
        });
    };
    Ok((rel, entry, raw.to_path_buf()))
}

/// The first differing byte of two files, `None` when identical.
fn first_difference(a: &Path, b: &Path) -> Result<Option<u64>> {
    let mut fa = std::fs::File::open(a).map_err(|e| Error::io(a, e))?;
    let mut fb = std::fs::File::open(b).map_err(|e| Error::io(b, e))?;
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    let mut at = 0u64;
    loop {
        let na = read_full(&mut fa, &mut ba).map_err(|e| Error::io(a, e))?;
        let nb = read_full(&mut fb, &mut bb).map_err(|e| Error::io(b, e))?;
        let n = na.min(nb);
        // Equal blocks (nearly all of them) are told by `memcmp`; only a block that
        // differs is searched byte by byte.
        if ba[..n] != bb[..n]
            && let Some(i) = ba[..n].iter().zip(&bb[..n]).position(|(x, y)| x != y)
        {
            return Ok(Some(at + i as u64));
        }
        if na != nb {
            return Ok(Some(at + n as u64));
        }
        if na == 0 {
            return Ok(None);
        }
        at += n as u64;
    }
}

fn read_full(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// What makes two host-only binaries interchangeable: marker and bundle indices.
fn host_identity(path: &Path, rel: &str) -> Option<(String, Vec<u64>)> {
    let size = std::fs::metadata(path).ok()?.len();
    let r = scan::inspect_file(path, rel, size, 0);
    if r.kind != FileKind::HostOnlyBinary {
        return None;
    }
    let marker = r.marker.as_ref()?;
    let mut cos: Vec<u64> = r
        .wrappers
        .iter()
        .map(|w| w.reserved & 0xffff_ffff)
        .collect();
    cos.sort_unstable();
    Some((
        format!(
            "paths {:?}, kernel_name {:?}",
            marker.kpack_search_paths, marker.kernel_name
        ),
        cos,
    ))
}

/// Compare one artifact across the shards holding it; differences are appended. The
/// two walks are met in their common order, entry by entry.
fn compare(
    name: &str,
    holders: &[&Shard],
    generic: bool,
    diffs: &mut Vec<Difference>,
) -> Result<()> {
    let first = holders[0];
    let base = first.path.join(name);
    for other in &holders[1..] {
        let dir = other.path.join(name);
        // Said by path: first what differs from the first holder, then what only
        // this shard has.
        let (mut found, mut only) = (Vec::new(), Vec::new());
        let diff = |to: &mut Vec<Difference>, path: &str, what: String, offset: Option<u64>| {
            to.push(Difference {
                artifact: name.to_string(),
                path: path.to_string(),
                shard: other.label.clone(),
                what,
                offset,
            })
        };
        let (mut ours, mut theirs) = (walk(&base).peekable(), walk(&dir).peekable());
        loop {
            let order = match (ours.peek(), theirs.peek()) {
                (Some(Ok(a)), Some(Ok(b))) => a.2.cmp(&b.2),
                (Some(Err(_)), _) => return ours.next().map_or(Ok(()), |e| e.map(|_| ())),
                (_, Some(Err(_))) => return theirs.next().map_or(Ok(()), |e| e.map(|_| ())),
                (Some(_), None) => std::cmp::Ordering::Less,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (None, None) => break,
            };
            match order {
                std::cmp::Ordering::Less => {
                    let Some((rel, ..)) = ours.next().transpose()? else {
                        break;
                    };
                    let what = format!("missing (present in {})", first.label);
                    diff(&mut found, &rel, what, None);
                }
                std::cmp::Ordering::Greater => {
                    let Some((rel, ..)) = theirs.next().transpose()? else {
                        break;
                    };
                    let what = format!("only in this shard, not in {}", first.label);
                    diff(&mut only, &rel, what, None);
                }
                std::cmp::Ordering::Equal => {
                    let (Some((rel, a, _)), Some((_, b, _))) =
                        (ours.next().transpose()?, theirs.next().transpose()?)
                    else {
                        break;
                    };
                    let paths = (base.join(to_path(&rel)), dir.join(to_path(&rel)));
                    if let Some((what, offset)) = entry_difference((&a, &b), paths, &rel, generic)?
                    {
                        diff(&mut found, &rel, what, offset);
                    }
                }
            }
        }
        found.sort_by(|a, b| a.path.cmp(&b.path));
        only.sort_by(|a, b| a.path.cmp(&b.path));
        diffs.extend(found.into_iter().chain(only));
    }
    Ok(())
}

/// How the entry at `rel` differs between two shards (`paths`), if it does.
fn entry_difference(
    (a, b): (&Entry, &Entry),
    (pa, pb): (PathBuf, PathBuf),
    rel: &str,
    generic: bool,
) -> Result<Option<(String, Option<u64>)>> {
    Ok(match (a, b) {
        (Entry::Dir, Entry::Dir) => None,
        (Entry::Symlink(a), Entry::Symlink(b)) if a == b => None,
        (Entry::Symlink(a), Entry::Symlink(b)) => Some((
            format!("symlink to {} instead of {}", b.display(), a.display()),
            None,
        )),
        (Entry::File(_), Entry::File(_)) => {
            let Some(at) = first_difference(&pa, &pb)? else {
                return Ok(None);
            };
            if generic {
                match (host_identity(&pa, rel), host_identity(&pb, rel)) {
                    (Some(a), Some(b)) if a == b => return Ok(None),
                    (Some(a), Some(b)) if a.0 != b.0 => {
                        return Ok(Some((format!("marker differs: {} vs {}", b.0, a.0), None)));
                    }
                    (Some(a), Some(b)) => {
                        let what = format!("bundle indices differ: {:?} vs {:?}", b.1, a.1);
                        return Ok(Some((what, None)));
                    }
                    _ => {}
                }
            }
            Some(("content differs".into(), Some(at)))
        }
        _ => Some(("a different kind of file".into(), None)),
    })
}

/// Copy the artifact at `src` into `dst`, walked again (not listed and held).
fn copy_tree(src: &Path, dst: &Path) -> Result<(u64, u64)> {
    let (mut files, mut bytes) = (0u64, 0u64);
    std::fs::create_dir_all(dst).map_err(|e| Error::io(dst, e))?;
    for item in walk(src) {
        let (rel, e, _) = item?;
        let (rel, e) = (&rel, &e);
        if rel == MANIFEST {
            continue; // written by the caller
        }
        let (s, d) = (src.join(to_path(rel)), dst.join(to_path(rel)));
        // A symlink placed by one artifact of the group must not lead another's files
        // out of the output: every existing directory on the way is a real one.
        let dir = if matches!(e, Entry::Dir) {
            d.as_path()
        } else {
            d.parent().unwrap_or(dst)
        };
        crate::fsutil::real_dirs_below(dst, dir).map_err(|why| {
            Error::Conflict(format!(
                "{rel}: cannot be placed, {why} (two artifacts of one output disagree on it)"
            ))
        })?;
        match e {
            Entry::Dir => std::fs::create_dir_all(&d).map_err(|e| Error::io(&d, e))?,
            Entry::Symlink(t) => {
                if std::fs::symlink_metadata(&d).is_ok() {
                    return Err(Error::Conflict(format!(
                        "{}: two artifacts of one output hold this path",
                        d.display()
                    )));
                }
                std::os::unix::fs::symlink(t, &d).map_err(|e| Error::io(&d, e))?;
                files += 1;
            }
            Entry::File(size) => {
                if std::fs::symlink_metadata(&d).is_ok() {
                    return Err(Error::Conflict(format!(
                        "{}: two artifacts of one output hold this path",
                        d.display()
                    )));
                }
                if let Some(p) = d.parent() {
                    std::fs::create_dir_all(p).map_err(|e| Error::io(p, e))?;
                }
                let n = std::fs::copy(&s, &d).map_err(|e| Error::io(&s, e))?;
                if n != *size {
                    return Err(Error::Changed {
                        path: s.clone(),
                        what: format!("copied {n} of {size} bytes (changed while combining?)"),
                    });
                }
                if let Ok(m) = std::fs::metadata(&s)
                    && let Ok(t) = m.modified()
                    && let Ok(f) = std::fs::File::options().write(true).open(&d)
                {
                    let _ = f.set_times(std::fs::FileTimes::new().set_modified(t));
                }
                files += 1;
                bytes += n;
            }
        }
    }
    Ok((files, bytes))
}

/// Combine `shards` into `out`.
pub fn combine(shards: &[PathBuf], out: &Path, opts: &CombineOptions) -> Result<CombineReport> {
    // An output directory this run creates is removed again when it fails, so a
    // refusal leaves nothing behind (an existing one keeps what it held).
    let created = std::fs::symlink_metadata(out).is_err();
    let r = combine_into(shards, out, opts);
    if r.is_err() && created {
        let _ = std::fs::remove_dir(out);
    }
    r
}

fn combine_into(shards: &[PathBuf], out: &Path, opts: &CombineOptions) -> Result<CombineReport> {
    let loaded = load_shards(shards, out)?;
    let holders = Holders::of(&loaded, opts)?;
    let mut diffs = Vec::new();
    holders.check_complete(&loaded, &mut diffs)?;
    for (name, hs) in &holders.by_artifact {
        compare(name, hs, name.ends_with("_generic"), &mut diffs)?;
    }
    if !diffs.is_empty() && holders.prefer.is_none() {
        let n = diffs.len();
        let list: Vec<String> = diffs.iter().take(50).map(ToString::to_string).collect();
        return Err(Error::Findings(format!(
            "the shards do not fit together ({n} difference(s)); nothing written. Pass \
             --prefer SHARD to take one shard's copy:\n  {}{}",
            list.join("\n  "),
            if n > 50 { "\n  …" } else { "" }
        )));
    }
    let (plans, missing) = plan_outputs(&holders, opts)?;

    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let names: Vec<String> = plans.iter().map(|p| p.name.clone()).collect();
    super::check_free(out, &names, opts.force)?;
    // What a killed run left is removed (CombineReport has no warnings channel:
    // the removal is silent, as the stage it replaces would have been).
    let (stage, _) = crate::fsutil::stage_for(out, "combine")?;
    let st = stage.path().to_path_buf();
    let mut artifacts = Vec::new();
    let mut bytes_out = 0;
    // Artifacts are copied side by side, each target's archives verified as soon as
    // they are in the stage (the decoding overlaps the other copies); the first
    // failure in plan order is the one said, whatever the thread count.
    let written: Vec<Result<(CombinedArtifact, u64)>> =
        plans.par_iter().map(|p| write_output(&st, p)).collect();
    for w in written {
        let (a, bytes) = w?;
        bytes_out += bytes;
        artifacts.push(a);
    }
    let (archives, kernels) = check_output(&st, &names)?;
    let warnings: Vec<String> = super::place(&st, out, (&names, &[], &[]), "combine", opts.force)?
        .into_iter()
        .collect();
    Ok(CombineReport {
        shards: shards.to_vec(),
        output: out.to_path_buf(),
        components: holders.components.into_iter().collect(),
        artifacts,
        missing,
        differences: diffs,
        archives,
        code_objects: kernels,
        bytes_out,
        warnings,
    })
}

/// Copy the parts of one output artifact into the stage and write its manifest: a
/// generic manifest keeps its order, a group's is the sorted union. Returns the
/// artifact and the bytes copied.
fn write_output(st: &Path, p: &OutPlan) -> Result<(CombinedArtifact, u64)> {
    let dst = st.join(&p.name);
    let mut prefixes = BTreeSet::new();
    let mut ordered = Vec::new();
    let (mut files, mut bytes) = (0, 0);
    let mut targets = BTreeMap::new();
    for (name, shard) in &p.parts {
        let src = shard.path.join(name);
        let (f, b) = copy_tree(&src, &dst)?;
        files += f;
        bytes += b;
        for pr in read_manifest(&src)? {
            if prefixes.insert(pr.clone()) {
                ordered.push(pr);
            }
        }
        if let Some((_, Some(t))) = parse_artifact_name(name) {
            targets.insert(t, shard.label.clone());
        }
    }
    let prefixes: Vec<String> = if p.name.ends_with("_generic") {
        ordered
    } else {
        prefixes.into_iter().collect()
    };
    fsutil::write_atomic(
        &dst.join(MANIFEST),
        manifest_text(&prefixes).as_bytes(),
        None,
    )?;
    if !p.name.ends_with("_generic") {
        verify_archives(&dst, &p.name)?;
    }
    let a = CombinedArtifact {
        name: p.name.clone(),
        targets,
        prefixes,
        files,
    };
    Ok((a, bytes))
}

/// Every archive below `root` (the staged artifact `name`) reads back whole: each
/// kernel decodes to its recorded size and checksum.
fn verify_archives(root: &Path, name: &str) -> Result<()> {
    for item in walk(root) {
        let (rel, e, _) = item?;
        if !matches!(e, Entry::File(_)) || !rel.ends_with(".kpack") {
            continue;
        }
        let faults = Archive::open(&root.join(to_path(&rel)))?.verify();
        if !faults.is_empty() {
            return Err(Error::Findings(format!(
                "{name}/{rel}: {}",
                faults.join("; ")
            )));
        }
    }
    Ok(())
}

/// The staged output's own check: every archive reads back (verified as it was
/// placed, by [`verify_archives`]), serves the target its
/// artifact is named for (or one of its group's), and holds only kernels of
/// host-only binaries of its component's generic artifact, at bundle indices they
/// have.
fn check_output(stage: &Path, names: &[String]) -> Result<(u64, u64)> {
    // component → kernel_name → bundle indices
    let mut hosts: BTreeMap<String, BTreeMap<String, BTreeSet<u64>>> = BTreeMap::new();
    for n in names {
        let Some((c, None)) = parse_artifact_name(n) else {
            continue;
        };
        let root = stage.join(n);
        let map = hosts.entry(c).or_default();
        for item in walk(&root) {
            let (rel, e, _) = item?;
            if !matches!(e, Entry::File(_)) {
                continue;
            }
            let p = root.join(to_path(&rel));
            let size = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
            let r = scan::inspect_file(&p, &rel, size, 0);
            if let (FileKind::HostOnlyBinary, Some(m)) = (r.kind, &r.marker) {
                map.entry(m.kernel_name.clone())
                    .or_default()
                    .extend(r.wrappers.iter().map(|w| w.reserved & 0xffff_ffff));
            }
        }
    }
    let (mut archives, mut kernels) = (0, 0);
    for n in names {
        // Every output but the generic ones holds archives, whatever its name: a
        // target (`blas_lib_gfx90a`) or a group of the configuration (`blas_lib_dcgpu`),
        // of the component whose generic artifact its name starts with.
        if n.ends_with("_generic") {
            continue;
        }
        let Some(c) = hosts
            .keys()
            .filter(|c| {
                n.strip_prefix(c.as_str())
                    .is_some_and(|r| r.starts_with('_'))
            })
            .max_by_key(|c| c.len())
            .cloned()
            .or_else(|| n.rsplit_once('_').map(|(c, _)| c.to_string()))
        else {
            continue;
        };
        let root = stage.join(n);
        for item in walk(&root) {
            let (rel, e, _) = item?;
            if !matches!(e, Entry::File(_)) || !rel.ends_with(".kpack") {
                continue;
            }
            let a = Archive::open(&root.join(to_path(&rel)))?;
            let where_ = format!("{n}/{rel}");
            let known = hosts.get(&c);
            for k in &a.index.kernels {
                let (name, co) = k.key.rsplit_once('#').unwrap_or((&k.key, ""));
                let ok = co.parse::<u64>().ok().is_some_and(|co| {
                    known
                        .and_then(|m| m.get(name))
                        .is_some_and(|cos| cos.contains(&co))
                });
                if !ok {
                    return Err(Error::Findings(format!(
                        "{where_}: kernel {} @ {} belongs to no host-only binary of \
                         {c}_generic",
                        k.key, k.arch
                    )));
                }
                if !a.index.meta.gfx_arches.iter().any(|g| **g == *k.arch) {
                    return Err(Error::Findings(format!(
                        "{where_}: code object {} is for {}, which the archive does not list",
                        k.key, k.arch
                    )));
                }
            }
            archives += 1;
            kernels += a.index.kernels.iter().filter(|k| !k.is_alias()).count() as u64;
        }
    }
    Ok((archives, kernels))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_names() {
        assert_eq!(
            parse_artifact_name("blas_lib_generic"),
            Some(("blas_lib".into(), None))
        );
        assert_eq!(
            parse_artifact_name("blas_lib_gfx90a:xnack+"),
            Some(("blas_lib".into(), Some("gfx90a:xnack+".into())))
        );
        assert_eq!(
            parse_artifact_name("rand_lib_gfx1250-strict"),
            Some(("rand_lib".into(), Some("gfx1250-strict".into())))
        );
        assert_eq!(parse_artifact_name("blas_lib_docs"), None);
        assert_eq!(parse_artifact_name("_generic"), None);
        assert_eq!(parse_artifact_name("plain"), None);
    }

    #[test]
    fn config_rules_of_the_reference() {
        let ok = br#"{"primary_shard":"a","architecture_groups":{
            "gfx110X":{"display_name":"RDNA3","architectures":["gfx1100","gfx1101"]},
            "gfx90a":{"architectures":["gfx90a"]}}}"#;
        let c = CombineConfig::parse(ok).unwrap();
        assert_eq!(c.groups.len(), 2);
        assert_eq!(c.groups[1].display_name, "gfx90a");
        for (bad, why) in [
            (&br#"{"primary_shard":"a","architecture_groups":{"g":{"architectures":[]}}}"#[..], "empty"),
            (br#"{"primary_shard":"a","architecture_groups":{"g":{"architectures":["1100"]}}}"#, "must start with 'gfx'"),
            (br#"{"architecture_groups":{"g":{"architectures":["gfx1"]}}}"#, "primary_shard"),
            (br#"{"primary_shard":"a"}"#, "architecture_groups"),
            (br#"{"primary_shard":"a","architecture_groups":{"g":[]}}"#, "not an object"),
            (br#"{"primary_shard":"a","architecture_groups":{"g":{}}}"#, "missing architectures"),
            (br#"{"primary_shard":"","architecture_groups":{"g":{"architectures":["gfx1"]}}}"#, "non-empty"),
            (br#"{"primary_shard":"a","architecture_groups":{"g":{"architectures":["gfx1"]}},"validation":1}"#, "validation"),
            (b"{", "invalid JSON"),
        ] {
            let e = CombineConfig::parse(bad).unwrap_err();
            assert!(e.contains(why), "{e} (wanted {why})");
        }
    }
}
