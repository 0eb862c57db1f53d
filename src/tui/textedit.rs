//! Editing one line of text in a dialog field: insert anywhere, cursor keys,
//! Home/End, Backspace/Delete, and the shell's Ctrl-A/E/U/W/K. The cursor is a
//! character index.

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn byte_at(s: &str, chars: usize) -> usize {
    s.char_indices().nth(chars).map_or(s.len(), |(i, _)| i)
}

/// Apply `k` to `text` with the cursor at `cursor`; false when the key is not an
/// editing key (the dialog may use it).
pub fn edit(text: &mut String, cursor: &mut usize, k: KeyEvent) -> bool {
    let n = text.chars().count();
    *cursor = (*cursor).min(n);
    let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
    match k.code {
        KeyCode::Char('a') if ctrl => *cursor = 0,
        KeyCode::Char('e') if ctrl => *cursor = n,
        KeyCode::Char('u') if ctrl => {
            text.replace_range(..byte_at(text, *cursor), "");
            *cursor = 0;
        }
        KeyCode::Char('k') if ctrl => text.truncate(byte_at(text, *cursor)),
        KeyCode::Char('w') if ctrl => {
            // Back over spaces, then over one word (up to a space or '/').
            let chars: Vec<char> = text.chars().collect();
            let mut start = *cursor;
            while start > 0 && chars[start - 1] == ' ' {
                start -= 1;
            }
            while start > 0 && !matches!(chars[start - 1], ' ' | '/') {
                start -= 1;
            }
            if start == *cursor && start > 0 {
                start -= 1; // a lone separator
            }
            let (a, b) = (byte_at(text, start), byte_at(text, *cursor));
            text.replace_range(a..b, "");
            *cursor = start;
        }
        KeyCode::Char(_) if ctrl => return false,
        KeyCode::Char(c) => {
            text.insert(byte_at(text, *cursor), c);
            *cursor += 1;
        }
        KeyCode::Backspace if *cursor > 0 => {
            let (a, b) = (byte_at(text, *cursor - 1), byte_at(text, *cursor));
            text.replace_range(a..b, "");
            *cursor -= 1;
        }
        KeyCode::Backspace => {}
        KeyCode::Delete if *cursor < n => {
            let (a, b) = (byte_at(text, *cursor), byte_at(text, *cursor + 1));
            text.replace_range(a..b, "");
        }
        KeyCode::Delete => {}
        KeyCode::Left => *cursor = cursor.saturating_sub(1),
        KeyCode::Right => *cursor = (*cursor + 1).min(n),
        KeyCode::Home => *cursor = 0,
        KeyCode::End => *cursor = n,
        _ => return false,
    }
    true
}

/// The text with a bar at the cursor, as a field shows it.
pub fn with_cursor(text: &str, cursor: usize) -> String {
    let i = byte_at(text, cursor);
    format!("{}▏{}", &text[..i], &text[i..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }
    fn ctrl(c: char) -> KeyEvent {
        KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
    }

    #[test]
    fn typing_inserts_anywhere_and_shell_keys_work() {
        let (mut t, mut c) = (String::from("out/demo"), 8);
        for ch in "-packed+tui".chars() {
            edit(&mut t, &mut c, k(KeyCode::Char(ch)));
        }
        assert_eq!(t, "out/demo-packed+tui");
        edit(&mut t, &mut c, k(KeyCode::Home));
        edit(&mut t, &mut c, k(KeyCode::Char('.')));
        edit(&mut t, &mut c, k(KeyCode::Char('/')));
        assert_eq!(t, "./out/demo-packed+tui");
        edit(&mut t, &mut c, ctrl('e'));
        edit(&mut t, &mut c, ctrl('w'));
        assert_eq!(t, "./out/");
        edit(&mut t, &mut c, k(KeyCode::Left));
        edit(&mut t, &mut c, k(KeyCode::Backspace));
        assert_eq!((t.as_str(), c), ("./ou/", 4));
        edit(&mut t, &mut c, k(KeyCode::Delete));
        assert_eq!(t, "./ou");
        edit(&mut t, &mut c, ctrl('u'));
        assert_eq!((t.as_str(), c), ("", 0));
        assert!(!edit(&mut t, &mut c, k(KeyCode::Enter)));
        assert!(!edit(&mut t, &mut c, ctrl('x')));
        let (mut t, mut c) = (String::from("gfx90a:xnack+é"), 3);
        edit(&mut t, &mut c, ctrl('k'));
        assert_eq!(t, "gfx");
        assert_eq!(with_cursor("abé", 2), "ab▏é");
    }
}
