//! The JSON Schemas of `docs/schema/`, generated from the types each `--json` report
//! (and each file the pipeline leaves for readers: the ledger, split's note to the
//! other shards) serialises, with `schemars`. `kpack-tui --generate schemas DIR`
//! writes them; `tests/json_schema.rs` checks that the committed files are these
//! bytes and validates real outputs against them.
//!
//! What the types alone do not say is added here: the `schema` field is the
//! document's id (a constant), and every object with named fields rejects others
//! (`additionalProperties: false`), so that an undocumented field fails the tests.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

/// One schema file: `<name>.schema.json`.
pub struct SchemaDoc {
    /// The file's stem (`scan`).
    pub name: &'static str,
    /// The document's id (`kpack-tui.scan/2`).
    pub id: &'static str,
    /// What produces the document.
    pub description: &'static str,
    generate: fn() -> Schema,
}

fn of<T: JsonSchema>() -> Schema {
    SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>()
}

macro_rules! doc {
    ($name:literal, $id:literal, $ty:ty, $description:literal) => {
        SchemaDoc {
            name: $name,
            id: $id,
            description: $description,
            generate: of::<$ty>,
        }
    };
}

/// Every schema, in file-name order.
pub fn all() -> Vec<SchemaDoc> {
    use crate::batch::{archive, pack, trace};
    vec![
        doc!(
            "archive",
            "kpack-tui.archive/2",
            archive::ArchiveJson<'static>,
            "kpack-tui ARCHIVE.kpack --json: the header and TOC of a .kpack archive."
        ),
        doc!(
            "combine",
            "kpack-tui.combine/2",
            kpack::artifacts::combine::CombineReport,
            "kpack-tui combine SHARD... -o OUT --json: the combined artifacts, where each target came from, and the differences a --prefer overrode."
        ),
        doc!(
            "diff",
            "kpack-tui.diff/2",
            kpack::diff::DiffReport,
            "kpack-tui diff OLD NEW --json: device bytes per target, changed files (renamed versioned libraries included), changed kernels, classes."
        ),
        doc!(
            "kernels",
            "kpack-tui.kernels/1",
            kpack::kernels::KernelsReport,
            "kpack-tui kernels PATH --json and find-kernel PATTERN PATH --json: one row per kernel of every code object; fields the code object does not carry are omitted."
        ),
        doc!(
            "ledger",
            "kpack-tui.ledger/1",
            kpack::kpack::ledger::Ledger,
            ".kpack/kpack-tui-ledger.json, written by pack: every kernel promised per host-only binary, with its SHA-256."
        ),
        doc!(
            "normalize",
            "kpack-tui.normalize/1",
            kpack::elf::normalize::NormalizeReport,
            "kpack-tui normalize [--check] PATH... --json: the ELF files that needed attention (noncompliant: program headers away from where EL8 kernels look; moved: the marker's segment moved away from its sections, by GNU strip on the reference layout; both repaired unless --check; damaged: left alone)."
        ),
        doc!(
            "pack",
            "kpack-tui.pack/2",
            kpack::pack::PackReport,
            "kpack-tui pack ... --json: what a pack did (the plan it carried out, archives written, growth, verification)."
        ),
        doc!(
            "pack-plan",
            "kpack-tui.pack-plan/2",
            kpack::pack::PackPlan,
            "kpack-tui pack ... --dry-run --json: what a pack would do, with the projected output size (exact or estimated)."
        ),
        doc!(
            "preview",
            "kpack-tui.preview/1",
            kpack::elf::rewrite::RewritePlan,
            "kpack-tui preview BINARY --json: the host-only rewrite of one ELF binary, computed and verified, not written."
        ),
        doc!(
            "preview-pe",
            "kpack-tui.preview-pe/1",
            kpack::coff::rewrite::PeRewritePlan,
            "kpack-tui preview IMAGE.dll --json: the host-only rewrite of one PE image, computed and verified, not written."
        ),
        doc!(
            "scan",
            "kpack-tui.scan/2",
            kpack::scan::TreeReport,
            "kpack-tui PATH --json (or scan PATH --json): every file of a tree (or one file) classified, with bundles, targets, sizes; totals per arch and class; diagnostics."
        ),
        doc!(
            "split",
            "kpack-tui.split/2",
            kpack::artifacts::SplitReport,
            "kpack-tui split ARTIFACT_DIR -o OUT --artifact-prefix AP --json: the artifacts written (generic first, then one per target ID)."
        ),
        doc!(
            "split-left",
            "kpack-tui.split-left/1",
            kpack::artifacts::ledger::LeftToOthers,
            "OUT/.kpack-tui-split-<AP>.json, written by split --gpu-targets: what it left to the shards building other targets."
        ),
        doc!(
            "table",
            "kpack-tui.table/1",
            crate::tui::export::TableJson,
            "A table exported from the TUI with J (kpack-<view>.json): the view's table as shown, its columns in order, each row an object of column name to the value's text (numbers with their units, as on screen; the Kernels table has the columns and values of `kernels --csv`)."
        ),
        doc!(
            "trace",
            "kpack-tui.trace/1",
            trace::Json<'static>,
            "kpack-tui trace FILE --json: builds found in a ninja log or phc trace, with their analysis."
        ),
        doc!(
            "verify-archive",
            "kpack-tui.verify-archive/2",
            archive::VerifyArchiveJson,
            "kpack-tui verify ARCHIVE.kpack --json: the verdict on one archive."
        ),
        doc!(
            "verify-device",
            "kpack-tui.verify-device/1",
            pack::VerifyDeviceJson<'static>,
            "kpack-tui verify TREE --device ISA --json: for each device, which bundles of which binaries the runtime would load, and which not."
        ),
        doc!(
            "verify-tree",
            "kpack-tui.verify-tree/1",
            pack::VerifyTreeJson<'static>,
            "kpack-tui verify TREE --json: the verdict on a packed tree (every ledger promise proved through the runtime lookup)."
        ),
        doc!(
            "wheel-split",
            "kpack-tui.wheel-split/2",
            kpack::wheel_split::WheelSplitReport,
            "kpack-tui wheel split WHEEL -o DIR --device-package-prefix P --overlay-root ROOT --json: the host wheel and the device wheels written (one per rocm-bootstrap bundle key)."
        ),
    ]
}

impl SchemaDoc {
    /// The schema as committed: the generated one, with its id, title and
    /// description, the `schema` constant first, and closed objects.
    pub fn schema(&self) -> Value {
        let mut root = (self.generate)().to_value();
        let Some(o) = root.as_object_mut() else {
            return root;
        };
        o.insert(
            "$id".into(),
            json!(format!(
                "https://kpack-tui.invalid/schema/{}.schema.json",
                self.name
            )),
        );
        o.insert("title".into(), json!(self.id));
        o.insert("description".into(), json!(self.description));
        let props = o
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        let mut with_id = Map::new();
        with_id.insert("schema".into(), json!({ "const": self.id }));
        with_id.extend(props.into_iter().filter(|(k, _)| k != "schema"));
        o.insert("properties".into(), Value::Object(with_id));
        let mut required = vec![json!("schema")];
        if let Some(Value::Array(r)) = o.get("required") {
            required.extend(r.iter().filter(|v| *v != "schema").cloned());
        }
        o.insert("required".into(), Value::Array(required));
        close_objects(&mut root);
        root
    }

    /// The file's text: pretty JSON and a newline.
    pub fn text(&self) -> String {
        let mut s = serde_json::to_string_pretty(&self.schema()).unwrap_or_default();
        s.push('\n');
        s
    }
}

/// `additionalProperties: false` on every object schema with named properties and
/// no word of its own on other keys (maps keep theirs), through every subschema.
fn close_objects(v: &mut Value) {
    let Value::Object(o) = v else { return };
    if o.contains_key("properties") && !o.contains_key("additionalProperties") {
        o.insert("additionalProperties".into(), Value::Bool(false));
    }
    for (k, c) in o.iter_mut() {
        match k.as_str() {
            // Maps of name → schema.
            "properties" | "$defs" | "patternProperties" => {
                if let Value::Object(m) = c {
                    m.values_mut().for_each(close_objects);
                }
            }
            // Lists of schemas.
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                if let Value::Array(a) = c {
                    a.iter_mut().for_each(close_objects);
                }
            }
            // One schema.
            "items" | "additionalProperties" | "not" | "if" | "then" | "else" => close_objects(c),
            // Values (const, enum, default, examples) and words.
            _ => {}
        }
    }
}

/// `--generate schemas DIR`: write every schema file into `dir`.
pub fn write_all(dir: &std::path::Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let docs = all();
    for d in &docs {
        std::fs::write(dir.join(format!("{}.schema.json", d.name)), d.text())?;
    }
    Ok(docs.len())
}
