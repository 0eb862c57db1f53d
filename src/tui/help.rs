//! The `?` overlay: exactly the keys of the current view.

use super::app::View;
use ratatui::Frame;
use ratatui::layout::Rect;

/// The keys of `view` (one of `views`; `wheel`: a wheel is open).
pub(crate) fn help(frame: &mut Frame, (views, view): (&[View], View), wheel: bool, area: Rect) {
    let views = format!("Tab / Shift-Tab, 1-{}", views.len());
    let mut keys: Vec<(&str, &str)> = vec![(views.as_str(), "switch view")];
    match view {
        View::Explorer => keys.extend([
            ("↑↓ j k, PgUp PgDn, g G", "move"),
            ("→ l, Enter", "open a folder"),
            ("← h", "go to the parent; on an open folder, close it"),
            ("Enter, p", "rewrite preview of a fat binary"),
            ("Enter", "on a .kpack: open it in the inspector"),
            ("K", "kernels of the selected file or folder"),
            (
                "Esc, Backspace",
                "clear the filter; back from a drill-down view",
            ),
            (
                "F H B C E",
                "fat binary · host-only · bundle · code object · embedded code",
            ),
            (
                "D K W @ ?",
                "kernel database · archive · wheel · symlink · special file",
            ),
            ("! ▸ ▾", "damaged (! lists why) · closed folder · open folder"),
            ("N%", "the device code's share of the entry's size"),
            ("(≈N×)", "a target's compression ratio in a wheel member"),
            ("s, S", "sort: size, name, device share; S reverses"),
            ("+, -", "open every folder, close them all"),
            ("n, N", "the next, previous damaged file"),
            ("z", "jump to a path by a few of its letters, in order"),
            ("[, ]", "back, forward through the places jumped from"),
            (
                "/",
                "filter by path, target (gfx942) or class (fat_binary); Esc clears",
            ),
            (
                "w, → l on a file",
                "into the detail (arrows scroll it); w, ← h or Esc back",
            ),
            ("Shift-↑↓, Shift-PgUp/PgDn", "scroll the detail"),
            (
                "mouse",
                "wheel scrolls the pane under it, click selects, tabs switch",
            ),
        ]),
        View::Families if wheel => keys.extend([
            ("↑↓ j k", "move"),
            (
                "Space, Enter",
                "toggle the family or target under the cursor",
            ),
            ("P", "split the wheel with these targets (all when none)"),
        ]),
        View::Families => keys.extend([
            ("↑↓ j k", "move"),
            ("w", "into the plan (arrows scroll it); w or Esc back"),
            ("Shift-↑↓, Shift-PgUp/PgDn", "scroll the plan"),
            (
                "Space, Enter",
                "toggle the family or target under the cursor",
            ),
            ("e", "compute the pack plan (the core's, as pack --dry-run)"),
            (
                "[x] [-] ·",
                "selected · packed with a selected preset · no code in the tree",
            ),
            ("█ ░", "a target's bar: packed by the selection · left out"),
            ("+N DB", "the target's bytes in kernel-database files"),
            ("P", "pack the tree with these families"),
        ]),
        View::Pack => keys.extend([
            ("↑↓", "next / previous field"),
            (
                "typing, ← → Home End",
                "edit the field (Ctrl-A/E/U/W/K as in a shell)",
            ),
            ("← → + - Home End", "on the level field: zstd level, End the highest"),
            (
                "F2, F3",
                "layout combined/split, archives per target/family (trees)",
            ),
            (
                "F4, F5",
                "code for targets not selected: stop (default) or drop; damaged fat binaries: stop (default) or copy (trees)",
            ),
            ("Enter", "start"),
            ("Esc", "back; while running: cancel cleanly"),
            ("o", "when done: the output in a kpack-tui of its own (q comes back)"),
        ]),
        View::Inspector => keys.extend([
            ("↑↓ j k, PgUp PgDn, g G", "move"),
            ("K", "the kernels inside the selected code object"),
            ("x", "extract the marked code objects, else the selected one (asks where)"),
            ("Space, u", "mark or unmark the row, clear the marks"),
            ("X", "extract every code object (asks where)"),
            ("v", "verify the archive (every frame decodes to its size)"),
            ("Esc, Backspace", "back to the Explorer"),
        ]),
        View::Kernels => keys.extend([
            ("↑↓ j k, PgUp PgDn, g G", "move"),
            (
                "s, S",
                "sort: code size, VGPRs, SGPRs, LDS, scratch, spills, name, target; S reverses",
            ),
            ("/", "find kernels by name; Esc clears"),
            ("a", "after K on an archive's entry: the whole archive"),
            ("Enter, o", "the kernel's file in the Explorer (Esc comes back)"),
            ("Space, u", "mark or unmark the kernel, clear the marks"),
            (
                "x",
                "extract the code objects of the marked kernels, else the selected one's",
            ),
            (
                "Esc, Backspace",
                "clear the search; else back to where K was pressed",
            ),
        ]),
        View::Preview => keys.extend([
            ("↑↓ j k, PgUp PgDn, g G", "scroll (to the start, the end)"),
            ("Esc, Backspace", "back to the Explorer"),
        ]),
    }
    keys.extend([
        ("!", "the session's messages, whole"),
        ("y, Y", "copy the selected item, the table (TSV)"),
        ("E, J", "export the table to ./kpack-<view>.csv, or .json"),
        (
            "V",
            "$PAGER on what the view shows (e: $EDITOR on a text file)",
        ),
        ("?", "this help (any key closes)"),
        ("q, Ctrl-C", "quit"),
    ]);
    let key_w = keys
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(8);
    super::widgets::key_overlay(
        frame,
        area,
        &format!(" keys: {} ", view.title()),
        &keys,
        key_w,
    );
}
