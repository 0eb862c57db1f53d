//! The explorer's detail of one file: kind, sizes, bundles per TU and targets,
//! wrappers, marker, problems; an ELF binary's segments and sections.

use super::widgets::Theme;
use crate::text::size;
use kpack::scan::{FileKind, FileReport};
use ratatui::style::{Color, Modifier};
use ratatui::text::{Line, Span};

/// An ELF file's segments (one line each) and sections (name and size, wrapped).
pub fn layout_lines(l: &kpack::elf::rewrite::ElfLayout, theme: Theme) -> Vec<Line<'static>> {
    let mut out = vec![Line::from(Span::styled(
        format!("segments ({})", l.segments.len()),
        theme.fg(Color::LightBlue),
    ))];
    for g in &l.segments {
        let flags: String = [(4, 'R'), (2, 'W'), (1, 'X')]
            .iter()
            .map(|(b, c)| if g.p_flags & b != 0 { *c } else { '-' })
            .collect();
        out.push(Line::from(format!(
            "  {:<12} {flags} off {:#08x} {:>10}",
            g.type_name(),
            g.p_offset,
            size(g.p_filesz)
        )));
    }
    out.push(Line::from(Span::styled(
        format!("sections ({})", l.sections.len()),
        theme.fg(Color::LightBlue),
    )));
    let names: Vec<String> = l
        .sections
        .iter()
        .filter(|s| !s.name.is_empty())
        .map(|s| format!("{} {}", s.name, size(s.sh_size)))
        .collect();
    out.push(Line::from(format!("  {}", names.join(" · "))));
    out
}

/// The lines describing one file (bundles per TU, targets, wrappers, marker, problems).
pub fn file_detail(f: &FileReport, theme: Theme) -> Vec<Line<'static>> {
    let mut l = vec![
        Line::from(Span::styled(
            f.path.clone(),
            theme.kind(f.kind).add_modifier(Modifier::BOLD),
        )),
        Line::from(match (f.kind, f.elf_kind) {
            // An ELF without device code is a host ELF, not an opaque blob.
            (FileKind::Opaque, Some(e)) => format!("host ELF ({}), {}", e.name(), size(f.size)),
            (k, e) => format!(
                "{}{}, {}",
                k.name(),
                match (f.container, e) {
                    (Some(c), _) => format!(" ({})", c.describe()),
                    (_, Some(e)) => match f.other_machine() {
                        Some(m) => format!(" ({}, {m})", e.name()),
                        None => format!(" ({})", e.name()),
                    },
                    _ => String::new(),
                },
                size(f.size)
            ),
        }),
    ];
    let dbd = super::tree::db_device(f);
    if dbd > 0 {
        l.push(Line::from(format!(
            "device code in this database: {}",
            size(dbd)
        )));
    }
    if let Some(h) = f.host_bytes {
        l.push(Line::from(format!(
            "host {} · fatbin {}",
            size(h),
            size(f.fatbin_bytes)
        )));
    }
    if let Some(t) = &f.target {
        l.push(Line::from(format!("→ {t}")));
    }
    if let Some(a) = &f.arch {
        l.push(Line::from(format!("arch {a}")));
    }
    if matches!(
        f.kind,
        FileKind::FatBinary | FileKind::Bundle | FileKind::Kpack | FileKind::CodeObject
    ) {
        l.push(Line::from(Span::styled(
            "K: the kernels of its code objects",
            theme.fg(Color::DarkGray),
        )));
    }
    if let (Some(d), Some(rule)) = (f.database, f.database_rule) {
        let key = f
            .database_key
            .as_deref()
            .filter(|k| Some(*k) != f.arch.as_deref())
            .map(|k| format!(" from {k}"))
            .unwrap_or_default();
        l.push(Line::from(format!(
            "{} database{key} · {}",
            d.name(),
            rule.describe()
        )));
    }
    // A static archive's bundles under their members' names (a thin archive's are
    // other files of the tree, named too).
    let own = f.bundles.iter().map(|b| (None, b));
    let of_members = f.members.iter().flat_map(|m| {
        let head = match &m.file {
            Some(p) => format!("member {} (thin: the file {p})", m.name),
            None => format!("member {} · {}", m.name, size(m.size)),
        };
        m.bundles
            .iter()
            .enumerate()
            .map(move |(i, b)| ((i == 0).then(|| head.clone()), b))
    });
    for (member, b) in own.chain(of_members) {
        if let Some(m) = member {
            l.push(Line::from(Span::styled(m, theme.fg(Color::LightBlue))));
        }
        let comp = b
            .ccob_version
            .map(|v| format!("{} v{v}", b.compression.name()))
            .unwrap_or_else(|| b.compression.name().to_string());
        l.push(Line::from(Span::styled(
            format!("TU {} · {comp} · {}", b.index, size(b.stored_size)),
            theme.fg(Color::LightYellow),
        )));
        for t in &b.targets {
            let ratio = if t.compressed_size > 0 && t.compressed_size != t.size {
                format!(" (≈{:.1}×)", t.size as f64 / t.compressed_size as f64)
            } else {
                String::new()
            };
            l.push(Line::from(format!(
                "  {:<15} {:>10}{ratio}",
                t.arch,
                size(t.size)
            )));
        }
    }
    if !f.embedded.is_empty() {
        l.push(Line::from(Span::styled(
            format!(
                "embedded: {} in its data, loaded by the binary itself (not packable)",
                f.embedded.len()
            ),
            theme.fg(Color::LightMagenta),
        )));
        for e in &f.embedded {
            l.push(Line::from(format!(
                "{}[{}] · {}",
                e.section,
                e.index,
                size(e.size)
            )));
            for t in &e.targets {
                l.push(Line::from(format!("  {:<15} {:>10}", t.arch, size(t.size))));
            }
        }
    }
    if !f.wrappers.is_empty() {
        let w: Vec<String> = f
            .wrappers
            .iter()
            .map(|w| match (w.magic, w.bundle) {
                (kpack::elf::WrapperMagic::Hipf, Some(b)) => format!("HIPF→{b}"),
                (kpack::elf::WrapperMagic::Hipk, _) => format!("HIPK#{}", w.reserved & 0xffff_ffff),
                _ => "?".to_string(),
            })
            .collect();
        l.push(Line::from(format!("wrappers: {}", w.join(" "))));
    }
    if let Some(m) = &f.marker {
        l.push(Line::from(format!("marker: {}", m.kernel_name)));
        for p in &m.kpack_search_paths {
            l.push(Line::from(format!("  {p}")));
        }
    }
    if let Some(k) = &f.kpack {
        l.push(Line::from(format!(
            "{} / {} · {} · {}",
            k.group_name,
            k.gfx_arch_family,
            crate::text::count(k.code_objects, "code object", "code objects"),
            k.compression_scheme
        )));
    }
    for p in &f.problems {
        l.push(Line::from(Span::styled(
            format!("! {p}"),
            theme.fg(Color::LightRed),
        )));
    }
    l
}
