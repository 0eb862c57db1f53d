//! Kernel-database files: per-architecture data that libraries load at run time
//! (Tensile for rocBLAS/hipBLASLt/hipSPARSELt, MIOpen, composable kernel, AOTriton,
//! hipkernelprovider, RocJitsu). Each file is attributed to an arch (or, for
//! AOTriton, a bundle key) from its path by the handlers of the newest reference
//! splitter (workflows §2.2), tried in registry order; the first match wins.
//!
//! Differences from the reference, on purpose:
//! * library directories are matched as whole path components (`foo_rocblas/library`
//!   is not rocBLAS), where the reference searches a substring;
//! * in Tensile file names a generic ISA keeps its full name (`gfx9-4-generic`, where
//!   the reference's pattern stops at `gfx9`).

use regex::Regex;
use serde::Serialize;
use std::sync::LazyLock;

/// Which library (handler) a database file belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Database {
    /// `…/rocblas/library/…` (Tensile).
    Rocblas,
    /// `…/hipblaslt/library/…` (Tensile).
    Hipblaslt,
    /// `…/hipsparselt/library/…` (Tensile).
    Hipsparselt,
    /// `…/aotriton.images/amd-gfx…/…` (keys are bundle keys, e.g. `gfx11`).
    Aotriton,
    /// MIOpen CK libraries and `…/miopen/db/` performance databases.
    Miopen,
    /// composable-kernel static libraries `libdevice_conv_operations_<arch>.a`.
    Composablekernel,
    /// `…/engines/arch_content/…/<arch>/…`.
    Hipkernelprovider,
    /// RocJitsu translation caches `share/rocjitsu/translations/<domain>/v1/…`.
    HotswapCache,
}

impl Database {
    /// The registry, in the reference's order (also the default precedence).
    pub const ALL: [Database; 8] = [
        Database::Rocblas,
        Database::Hipblaslt,
        Database::Hipsparselt,
        Database::Aotriton,
        Database::Miopen,
        Database::Composablekernel,
        Database::Hipkernelprovider,
        Database::HotswapCache,
    ];

    /// The handler name, as `--split-databases` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Database::Rocblas => "rocblas",
            Database::Hipblaslt => "hipblaslt",
            Database::Hipsparselt => "hipsparselt",
            Database::Aotriton => "aotriton",
            Database::Miopen => "miopen",
            Database::Composablekernel => "composablekernel",
            Database::Hipkernelprovider => "hipkernelprovider",
            Database::HotswapCache => "hotswap_cache",
        }
    }

    /// A handler by name.
    pub fn from_name(name: &str) -> Option<Database> {
        Database::ALL.into_iter().find(|d| d.name() == name)
    }

    /// This handler's verdict on a `/`-separated path relative to its prefix root.
    pub fn match_path(self, rel: &str) -> Option<(String, Rule)> {
        let components: Vec<&str> = rel.split('/').collect();
        let (name, dirs) = components.split_last()?;
        match self {
            Database::Rocblas => tensile(rel, dirs, name, "rocblas"),
            Database::Hipblaslt => tensile(rel, dirs, name, "hipblaslt"),
            Database::Hipsparselt => tensile(rel, dirs, name, "hipsparselt"),
            Database::Aotriton => aotriton(dirs),
            Database::Miopen => miopen(dirs, name),
            Database::Composablekernel => composablekernel(name),
            Database::Hipkernelprovider => arch_content(dirs),
            Database::HotswapCache => hotswap(&components),
        }
    }
}

/// Which rule attributed a file (shown by `scan`, so a surprising attribution can be
/// traced to its cause).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// An arch in a Tensile `.co`/`.hsaco`/`.dat` file name.
    TensileFileName,
    /// A Tensile `library/<arch>/` directory.
    TensileArchDir,
    /// An MIOpen CK library name `libMIOpenCK…_<arch>.so`.
    MiopenCkLibrary,
    /// An MIOpen database name, CU count removed (`gfx90878` is gfx908).
    MiopenDbName,
    /// A composable-kernel library name `libdevice_conv_operations_<arch>.a`.
    CkLibraryName,
    /// An AOTriton `amd-gfx…` image directory (a bundle key).
    AotritonImageDir,
    /// A hipkernelprovider `engines/arch_content/…/<arch>/` directory.
    ArchContentDir,
    /// A RocJitsu translation domain.
    RocjitsuDomain,
}

impl Rule {
    /// A short description for text output.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::TensileFileName => "Tensile file name",
            Rule::TensileArchDir => "Tensile library/<arch>/ directory",
            Rule::MiopenCkLibrary => "MIOpen CK library name",
            Rule::MiopenDbName => "MIOpen db name, CU count removed",
            Rule::CkLibraryName => "composable-kernel library name",
            Rule::AotritonImageDir => "AOTriton amd-gfx image directory",
            Rule::ArchContentDir => "arch_content directory",
            Rule::RocjitsuDomain => "RocJitsu translation domain",
        }
    }
}

/// A recognised database file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DatabaseFile {
    /// The handler that claimed it.
    pub database: Database,
    /// What the handler returned, verbatim (`gfx90a-xnack+`, `gfx12_0`).
    pub key: String,
    /// The arch it is filed under: [`base_arch`] of the key (`gfx90a`).
    pub arch: String,
    /// Why.
    pub rule: Rule,
}

/// `gfx<digits><letters>[-strict][-xnack±]`, as the reference's handlers read arches.
const ARCH: &str = r"gfx[0-9]+[a-z]*(?:-strict)?(?:-xnack[+-])?";

fn re(pattern: &str) -> Regex {
    // The patterns are constants of this module, checked by the unit tests.
    Regex::new(pattern).expect("constant pattern")
}

static GENERIC: LazyLock<Regex> = LazyLock::new(|| re(r"gfx[0-9]+(?:-[0-9]+)?-generic"));
static ARCH_RE: LazyLock<Regex> = LazyLock::new(|| re(ARCH));
static ARCH_FULL: LazyLock<Regex> = LazyLock::new(|| re(&format!("^{ARCH}$")));
static LIB_ARCH_DIR: LazyLock<Regex> = LazyLock::new(|| re(&format!("/library/({ARCH})/")));
static MIOPEN_CK: LazyLock<Regex> = LazyLock::new(|| {
    re(&format!(
        r"^(?:lib)?MIOpenCK[0-9A-Za-z_]+_({ARCH})\.(?:so|dll)"
    ))
});
static MIOPEN_ARCH: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"gfx(?:90a|900|906|908|940|941|942|950|1010|1030|1100|1101|1102|1150|1151|1200|1201|1250(?:-strict)?)",
    )
});
static CK_LIB: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"^(?:lib)?device_conv_operations_(gfx[0-9]+[a-z]*(?:_strict)?)(?:_(?:xnack|sramecc)[p_])*\.(?:a|lib)$",
    )
});
static HOTSWAP_FILE: LazyLock<Regex> = LazyLock::new(|| re(r"^[0-9a-f]{64}\.(?:man|obj)$"));

fn has_pair(components: &[&str], a: &str, b: &str) -> bool {
    components.windows(2).any(|w| w[0] == a && w[1] == b)
}

fn tensile(rel: &str, dirs: &[&str], name: &str, lib: &str) -> Option<(String, Rule)> {
    if !has_pair(dirs, lib, "library") {
        return None;
    }
    let ext = name.rsplit_once('.').map(|(_, e)| e).unwrap_or("");
    if matches!(ext, "co" | "hsaco" | "dat") {
        let generic = GENERIC.find(name);
        if let Some(m) = ARCH_RE.find(name) {
            let m = generic.filter(|g| g.start() == m.start()).unwrap_or(m);
            return Some((m.as_str().to_string(), Rule::TensileFileName));
        }
    }
    let slashed = format!("/{rel}");
    LIB_ARCH_DIR
        .captures(&slashed)
        .map(|c| (c[1].to_string(), Rule::TensileArchDir))
}

fn miopen(dirs: &[&str], name: &str) -> Option<(String, Rule)> {
    if let Some(c) = MIOPEN_CK.captures(name) {
        return Some((c[1].to_string(), Rule::MiopenCkLibrary));
    }
    let db_name = [".kdb", ".model", ".db.txt", ".fdb.txt"]
        .iter()
        .any(|s| name.ends_with(s));
    if has_pair(dirs, "miopen", "db") && db_name {
        return MIOPEN_ARCH
            .find(name)
            .map(|m| (m.as_str().to_string(), Rule::MiopenDbName));
    }
    None
}

fn composablekernel(name: &str) -> Option<(String, Rule)> {
    CK_LIB
        .captures(name)
        .map(|c| (c[1].replace("_strict", "-strict"), Rule::CkLibraryName))
}

fn aotriton(dirs: &[&str]) -> Option<(String, Rule)> {
    let i = dirs.iter().position(|c| *c == "aotriton.images")?;
    let image = dirs.get(i + 1)?.strip_prefix("amd-")?;
    if !image.starts_with("gfx") {
        return None;
    }
    let key = match image {
        "gfx11xx" => "gfx11",
        "gfx120x" => "gfx12_0",
        other => other,
    };
    Some((key.to_string(), Rule::AotritonImageDir))
}

fn arch_content(dirs: &[&str]) -> Option<(String, Rule)> {
    let i = (1..dirs.len()).find(|&i| {
        matches!(dirs[i], "arch_content" | "test_arch_content") && dirs[i - 1] == "engines"
    })?;
    dirs[i + 1..]
        .iter()
        .find(|c| ARCH_FULL.is_match(c))
        .map(|c| (c.to_string(), Rule::ArchContentDir))
}

fn hotswap(components: &[&str]) -> Option<(String, Rule)> {
    let [share, rocjitsu, translations, domain, v1, file] = components else {
        return None;
    };
    if (*share, *rocjitsu, *translations, *v1) != ("share", "rocjitsu", "translations", "v1")
        || !HOTSWAP_FILE.is_match(file)
    {
        return None;
    }
    let arch = match *domain {
        "gfx1250-b0-a0" => "gfx1250",
        _ => return None,
    };
    Some((arch.to_string(), Rule::RocjitsuDomain))
}

/// The base arch: hyphen or colon feature suffixes (`xnack`, `sramecc`) removed,
/// `-strict` and `-generic` kept. `gfx90a-sramecc+-xnack-` → `gfx90a`,
/// `gfx1250-strict-xnack-` → `gfx1250-strict`.
pub fn base_arch(arch: &str) -> String {
    let colon = arch
        .replace("-xnack", ":xnack")
        .replace("-sramecc", ":sramecc");
    colon.split(':').next().unwrap_or_default().to_string()
}

/// Classify a path relative to its prefix root (`/`-separated) with every handler.
pub fn classify(rel_path: &str) -> Option<DatabaseFile> {
    classify_with(rel_path, &Database::ALL)
}

/// Classify with the given handlers, in precedence order; the first match wins.
pub fn classify_with(rel_path: &str, handlers: &[Database]) -> Option<DatabaseFile> {
    handlers.iter().find_map(|&database| {
        database
            .match_path(rel_path)
            .map(|(key, rule)| DatabaseFile {
                database,
                arch: base_arch(&key),
                key,
                rule,
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(h: Database, p: &str) -> Option<String> {
        h.match_path(p).map(|(k, _)| k)
    }

    /// Every positive example of workflows §2.3.
    #[test]
    fn spec_positives() {
        use Database::*;
        let cases: &[(Database, &str, &str)] = &[
            (
                Rocblas,
                "lib/rocblas/library/TensileLibrary_gfx1100.co",
                "gfx1100",
            ),
            (
                Rocblas,
                "lib/rocblas/library/kernel_gfx1101.hsaco",
                "gfx1101",
            ),
            (
                Rocblas,
                "lib/rocblas/library/TensileLibrary_gfx1102.dat",
                "gfx1102",
            ),
            (
                Rocblas,
                "lib/rocblas/library/TensileLibrary_lazy_gfx90a-xnack+.hsaco",
                "gfx90a-xnack+",
            ),
            (
                Hipblaslt,
                "lib/hipblaslt/library/Kernels.so-000-gfx942-xnack-.hsaco",
                "gfx942-xnack-",
            ),
            (
                Rocblas,
                "lib/rocblas/library/gfx942/TensileLibrary_Type_HH_gfx942.co",
                "gfx942",
            ),
            (
                Rocblas,
                "lib/rocblas/library/gfx90a/TensileManifest.txt",
                "gfx90a",
            ),
            (
                Rocblas,
                "lib/rocblas/library/gfx942-xnack+/TensileLibrary.co",
                "gfx942-xnack+",
            ),
            (
                Hipblaslt,
                "lib/hipblaslt/library/gfx1100/TensileManifest.txt",
                "gfx1100",
            ),
            (
                Hipsparselt,
                "lib/hipsparselt/library/extop_gfx942.co",
                "gfx942",
            ),
            (
                Hipsparselt,
                "lib/hipsparselt/library/Kernels.so-000-gfx950.hsaco",
                "gfx950",
            ),
            (
                Hipsparselt,
                "lib/hipsparselt/library/TensileLibrary_BB_BB_A_gfx942.dat",
                "gfx942",
            ),
            (Miopen, "share/miopen/db/gfx942.kdb", "gfx942"),
            (Miopen, "share/miopen/db/gfx908.tn.model", "gfx908"),
            (Miopen, "share/miopen/db/gfx90a_metadata.tn.model", "gfx90a"),
            (Miopen, "share/miopen/db/gfx950_3d.tn.model", "gfx950"),
            (Miopen, "share/miopen/db/gfx90878.db.txt", "gfx908"),
            (Miopen, "share/miopen/db/gfx942130.HIP.fdb.txt", "gfx942"),
            (Miopen, "share/miopen/db/gfx900_56.OpenCL.fdb.txt", "gfx900"),
            (Miopen, "share/miopen/db/gfx90a68.db.txt", "gfx90a"),
            (Miopen, "share/miopen/db/gfx1030_36.db.txt", "gfx1030"),
            (Miopen, "share/miopen/db/gfx90a6e.HIP.fdb.txt", "gfx90a"),
            (Miopen, "share/miopen/db/gfx942e4.db.txt", "gfx942"),
            (Miopen, "lib/libMIOpenCKGroupedConv_gfx942.so", "gfx942"),
            (
                Miopen,
                "lib/libMIOpenCKGroupedConv_gfx942-xnack+.so",
                "gfx942-xnack+",
            ),
            (Miopen, "lib/MIOpenCKGroupedConv_gfx942.dll", "gfx942"),
            (Miopen, "lib/libMIOpenCKGroupedConv_gfx942.so.1", "gfx942"),
            (
                Composablekernel,
                "lib/libdevice_conv_operations_gfx950_xnackp.a",
                "gfx950",
            ),
            (
                Composablekernel,
                "lib/libdevice_conv_operations_gfx90a_xnack_.a",
                "gfx90a",
            ),
            (
                Composablekernel,
                "lib/libdevice_conv_operations_gfx942_srameccp_xnack_.a",
                "gfx942",
            ),
            (
                Composablekernel,
                "lib/libdevice_conv_operations_gfx1250_strict_xnackp.a",
                "gfx1250-strict",
            ),
            (
                Composablekernel,
                "lib/device_conv_operations_gfx1250_strict.lib",
                "gfx1250-strict",
            ),
            (
                Aotriton,
                "lib/aotriton.images/amd-gfx942/flash/attn_fwd/kernel.aks2",
                "gfx942",
            ),
            (
                Aotriton,
                "lib/aotriton.images/amd-gfx942/__signature__",
                "gfx942",
            ),
            (
                Aotriton,
                "lib/aotriton.images/amd-gfx11xx/flash/k.aks2",
                "gfx11",
            ),
            (
                Aotriton,
                "lib/aotriton.images/amd-gfx110x/flash/k.aks2",
                "gfx110x",
            ),
            (
                Aotriton,
                "lib/aotriton.images/amd-gfx115x/flash/k.aks2",
                "gfx115x",
            ),
            (
                Aotriton,
                "lib/aotriton.images/amd-gfx120x/flash/k.aks2",
                "gfx12_0",
            ),
            (
                Hipkernelprovider,
                "lib/hipdnn_plugins/engines/arch_content/p/gfx942/kernels_gfx942.kpack",
                "gfx942",
            ),
            (
                Hipkernelprovider,
                "lib/hipdnn_plugins/engines/arch_content/p/gfx942/kernels_gfx942.json",
                "gfx942",
            ),
            (
                Hipkernelprovider,
                "lib/hipdnn_plugins/engines/arch_content/p/gfx942/sub/extra/blob.bin",
                "gfx942",
            ),
            (
                Hipkernelprovider,
                "lib/engines/arch_content/gfx942/kernels.kpack",
                "gfx942",
            ),
            (
                Hipkernelprovider,
                "lib/engines/test_arch_content/hip-kernel-provider/unit/shared/gfx1101/kernels.kpack",
                "gfx1101",
            ),
            (
                Hipkernelprovider,
                "lib/engines/arch_content/p/gfx942-xnack+/k.kpack",
                "gfx942-xnack+",
            ),
            (
                Miopen,
                "share/miopen/db/gfx1250-strict256.HIP.fdb.txt",
                "gfx1250-strict",
            ),
            (Miopen, "share/miopen/db/gfx1250_256.db.txt", "gfx1250"),
            (
                Miopen,
                "share/miopen/db/gfx1250-strict_256.db.txt",
                "gfx1250-strict",
            ),
            (
                Miopen,
                "lib/libMIOpenCKGroupedConv_gfx1250-strict.so",
                "gfx1250-strict",
            ),
            (
                Hipblaslt,
                "lib/hipblaslt/library/gfx1250-strict/TensileManifest.txt",
                "gfx1250-strict",
            ),
            (
                HotswapCache,
                &format!(
                    "share/rocjitsu/translations/gfx1250-b0-a0/v1/{}.obj",
                    "a".repeat(64)
                ),
                "gfx1250",
            ),
        ];
        for (h, path, want) in cases {
            assert_eq!(
                key(*h, path).as_deref(),
                Some(*want),
                "{} on {path}",
                h.name()
            );
        }
    }

    /// Every negative example of workflows §2.3, against every handler.
    #[test]
    fn spec_negatives() {
        let paths = [
            "lib/other/library/TensileLibrary_gfx1100.dat",
            "lib/rocblas/library/TensileLibrary_gfx1100.txt",
            "lib/rocblas/library/TensileLibrary.dat",
            "lib/hipblaslt/library/generic.dat",
            "lib/hipsparselt/library/something_gfx942.so",
            "share/other/db/gfx908.tn.model",
            "share/miopen/db/gfx908.json",
            "share/miopen/db/generic.tn.model",
            "lib/libMIOpen.so",
            "lib/libMIOpenCKGroupedConv.so",
            "lib/MIOpen.dll",
            "lib/libdevice_conv_operations.a",
            "lib/libdevice_conv_operations_foo.a",
            "lib/libdevice_conv_operations_xnack.a",
            "lib/libdevice_conv_operations_gfx11_generic.a",
            "lib/libdevice_gemm_operations_gfx942.a",
            "lib/libdevice_conv_operations_gfx942.so",
            "lib/libdevice_conv_operations_gfx942.a.bak",
            "lib/libdevice_conv_operations_gfx942.lib.a",
            "lib/xlibdevice_conv_operations_gfx942.a",
            "lib/aotriton.images/gfx942/k.aks2",
            "lib/aotriton.images/amd-common/k.aks2",
            "lib/aotriton/amd-gfx942/k.aks2",
            "lib/engines/arch_content/p/config/settings.json",
            "lib/engines/arch_content/p/common/shared.json",
            "lib/engines/test_arch_content/p/test_kpack_binary/test_zstd.kpack",
            "share/x/arch_content/gfx942/data.bin",
            "lib/arch_content/gfx942/k.kpack",
            "lib/engines/other/gfx942/blob.bin",
            "bin/hip_kernel_provider/rocke/instances/gfx942/x.py",
            "lib/engines/arch_content/gfx942",
            "lib/engines/arch_content/p/gfx11-generic/k.kpack",
            "lib/engines/arch_content/p/gfx1250-b0-a0/k.kpack",
            "share/rocjitsu/translations/gfx942/v1/abc.obj",
        ];
        for p in paths {
            assert_eq!(classify(p), None, "{p}");
        }
        // A hipBLASLt file under rocblas/library is not hipBLASLt's.
        assert_eq!(
            key(
                Database::Hipblaslt,
                "lib/rocblas/library/TensileLibrary_gfx1100.dat"
            ),
            None
        );
    }

    #[test]
    fn base_arch_and_precedence() {
        assert_eq!(base_arch("gfx90a-xnack-"), "gfx90a");
        assert_eq!(base_arch("gfx90a-sramecc+-xnack-"), "gfx90a");
        assert_eq!(base_arch("gfx1250-strict-xnack-"), "gfx1250-strict");
        assert_eq!(base_arch("gfx942:sramecc+:xnack-"), "gfx942");
        assert_eq!(base_arch("gfx11-generic"), "gfx11-generic");
        let f = classify("lib/rocblas/library/TensileLibrary_lazy_gfx90a-xnack-.hsaco").unwrap();
        assert_eq!(
            (f.key.as_str(), f.arch.as_str()),
            ("gfx90a-xnack-", "gfx90a")
        );
        assert_eq!(f.rule, Rule::TensileFileName);
        // The caller's order decides: a CK library claimed by MIOpen first.
        let ck = "lib/libdevice_conv_operations_gfx942.a";
        assert_eq!(
            classify_with(ck, &[Database::Miopen]),
            None,
            "only the handlers given are tried"
        );
        assert_eq!(
            classify_with(ck, &Database::ALL).unwrap().database,
            Database::Composablekernel
        );
        for d in Database::ALL {
            assert_eq!(Database::from_name(d.name()), Some(d));
        }
        assert_eq!(Database::from_name("tensile"), None);
    }

    #[test]
    fn generic_isa_names_kept_whole() {
        let f = classify("lib/rocblas/library/Kernels_gfx9-4-generic.co").unwrap();
        assert_eq!(f.arch, "gfx9-4-generic");
        let f = classify("lib/rocblas/library/Kernels_gfx11-generic.hsaco").unwrap();
        assert_eq!(f.arch, "gfx11-generic");
        // Component-exact library directories.
        assert_eq!(classify("lib/foo_rocblas/library/x_gfx90a.co"), None);
        assert_eq!(
            classify("rocblas/library/x_gfx90a.co").unwrap().database,
            Database::Rocblas
        );
    }
}
