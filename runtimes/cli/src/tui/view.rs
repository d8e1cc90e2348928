//! Drawing: the [`App`] state onto a ratatui frame. Header (session), transcript, the
//! pending prompt, the input line and a status bar with the port.

use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;
use unicode_width::UnicodeWidthChar;

use super::app::{App, Mode};
use super::transcript::LineKind;

/// What the view shows besides the app state.
#[derive(Clone, Copy, Debug)]
pub struct Chrome {
    /// The TCP port SDK clients connect to.
    pub port: u16,
    /// How many SDK clients are connected (the UI itself not counted).
    pub clients: usize,
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &mut App, chrome: Chrome) {
    let prompt_rows = if app.mode() == Mode::Chat { 0 } else { 3 };
    let [header, body, prompt, input, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(prompt_rows),
        Constraint::Length(3),
        Constraint::Length(1),
    ])
    .areas(frame.area());

    let session = app.session().unwrap_or("(none)");
    let busy = if app.transcript().is_busy() {
        " · working…"
    } else {
        ""
    };
    frame.render_widget(
        Paragraph::new(format!(" agentwire · session {session}{busy}"))
            .style(Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD)),
        header,
    );

    draw_transcript(frame, app, body);

    let mode = app.mode();
    let input_title = match mode {
        Mode::Chat => " prompt · Enter sends · /quit exits ".to_owned(),
        Mode::Permission { .. } => " y approves · n denies ".to_owned(),
        Mode::Form {
            field: Some(field),
            step,
            steps,
            ..
        } => format!(
            " {} ({}) · field {} of {steps} · Esc declines ",
            field.label,
            field.hint(),
            step + 1
        ),
        Mode::Form { field: None, .. } => " Enter accepts · Esc declines ".to_owned(),
    };
    if let Some(question) = match mode {
        Mode::Chat => None,
        Mode::Permission { summary } => Some(format!("Allow? {summary}")),
        Mode::Form { message, .. } => Some(message.to_owned()),
    } {
        frame.render_widget(
            Paragraph::new(question).block(
                Block::new()
                    .borders(Borders::ALL)
                    .border_style(Style::new().fg(Color::Yellow))
                    .title(" waiting for you "),
            ),
            prompt,
        );
    }

    draw_input(frame, app, mode, input, input_title);

    let line = format!(
        " listening on port {} · clients: {} · {}",
        chrome.port,
        chrome.clients,
        app.status()
    );
    frame.render_widget(
        Paragraph::new(line).style(Style::new().add_modifier(Modifier::DIM)),
        status,
    );
}

fn draw_transcript(frame: &mut Frame<'_>, app: &mut App, area: Rect) {
    let width = usize::from(area.width.max(1));
    let mut rows: Vec<Line<'static>> = Vec::new();
    for (i, line) in app.transcript().lines().iter().enumerate() {
        let (prefix, style) = decoration(line.kind);
        if line.kind == LineKind::User && i > 0 {
            rows.push(Line::raw(""));
        }
        for (j, piece) in wrap(&format!("{prefix}{}", line.text), width)
            .into_iter()
            .enumerate()
        {
            let text = if j == 0 { piece } else { format!("  {piece}") };
            rows.push(Line::from(Span::styled(text, style)));
        }
    }
    let height = usize::from(area.height);
    let max_scroll = rows.len().saturating_sub(height);
    app.clamp_scroll(max_scroll);
    let end = rows.len() - app.scroll();
    let start = end.saturating_sub(height);
    let visible: Vec<Line<'static>> = rows.drain(start..end).collect();
    frame.render_widget(Paragraph::new(visible), area);
}

fn draw_input(frame: &mut Frame<'_>, app: &App, mode: Mode<'_>, area: Rect, title: String) {
    let block = Block::new().borders(Borders::ALL).title(title);
    let inner = block.inner(area);
    let (text, cursor) = match mode {
        Mode::Permission { .. } => (String::new(), 0),
        _ => (app.input().text().to_owned(), app.input().cursor()),
    };
    // Keep the cursor in view: drop characters from the left until it fits.
    let width = usize::from(inner.width.max(1));
    let chars: Vec<char> = text.chars().collect();
    let mut skip = 0;
    while skip < cursor && display_width(&chars[skip..cursor]) >= width {
        skip += 1;
    }
    let shown: String = chars[skip..].iter().collect();
    frame.render_widget(Paragraph::new(shown).block(block), area);
    if !matches!(mode, Mode::Permission { .. }) {
        let column = display_width(&chars[skip..cursor]);
        let x = inner.x + u16::try_from(column).unwrap_or(inner.width);
        frame.set_cursor_position(Position::new(x, inner.y));
    }
}

/// The prefix and style of a transcript line.
fn decoration(kind: LineKind) -> (&'static str, Style) {
    match kind {
        LineKind::User => (
            "you › ",
            Style::new().fg(Color::Cyan).add_modifier(Modifier::BOLD),
        ),
        LineKind::Assistant => ("assistant › ", Style::new()),
        LineKind::Tool => ("tool › ", Style::new().fg(Color::Yellow)),
        LineKind::ToolResult => ("  ↳ ", Style::new().fg(Color::Green)),
        LineKind::ToolError => ("  ✗ ", Style::new().fg(Color::Red)),
        LineKind::Prompt => (
            "? ",
            Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD),
        ),
        LineKind::Answer => ("  ✓ ", Style::new().fg(Color::Green)),
        LineKind::Info => ("· ", Style::new().add_modifier(Modifier::DIM)),
        LineKind::Error => ("error › ", Style::new().fg(Color::Red)),
        LineKind::Other => ("· ", Style::new().add_modifier(Modifier::DIM)),
    }
}

fn display_width(chars: &[char]) -> usize {
    chars.iter().map(|c| c.width().unwrap_or(0)).sum()
}

/// Splits `text` into rows of at most `width` columns, breaking at the last space that fits
/// (or anywhere inside a word longer than a row). Never returns an empty list.
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut rows = Vec::new();
    let mut row = String::new();
    let mut row_width = 0;
    // Byte index in `row` just after the last space, and the width up to it.
    let mut last_space: Option<(usize, usize)> = None;
    for c in text.chars() {
        let c = if c.is_control() { ' ' } else { c };
        let w = c.width().unwrap_or(0);
        if row_width + w > width && !row.is_empty() {
            if c == ' ' {
                // Break at this space: it ends the row.
                rows.push(std::mem::take(&mut row).trim_end().to_owned());
                row_width = 0;
                last_space = None;
                continue;
            }
            match last_space {
                Some((at, before)) if at < row.len() => {
                    let rest = row.split_off(at);
                    rows.push(row.trim_end().to_owned());
                    row = rest;
                    row_width -= before;
                }
                _ => {
                    rows.push(std::mem::take(&mut row).trim_end().to_owned());
                    row_width = 0;
                }
            }
            last_space = None;
        }
        row.push(c);
        row_width += w;
        if c == ' ' {
            last_space = Some((row.len(), row_width));
        }
    }
    rows.push(row);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_breaks_at_spaces_and_inside_long_words() {
        assert_eq!(wrap("", 10), [""]);
        assert_eq!(wrap("hello world", 20), ["hello world"]);
        assert_eq!(wrap("hello world again", 11), ["hello world", "again"]);
        assert_eq!(wrap("hello world", 7), ["hello", "world"]);
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("a\nb", 10), ["a b"]);
        assert_eq!(wrap("x", 0), ["x"]);
        // Wide characters take two columns.
        assert_eq!(wrap("日本語", 4), ["日本", "語"]);
        for row in wrap("the quick brown fox jumps over the lazy dog", 9) {
            assert!(row.chars().count() <= 9, "{row:?}");
        }
    }

    #[test]
    fn the_screen_shows_header_transcript_input_and_port() {
        use crate::tui::app::AppOptions;
        use ratatui::backend::TestBackend;
        use ratatui::Terminal;

        let mut app = App::new(AppOptions::default());
        let mut terminal = Terminal::new(TestBackend::new(60, 12)).unwrap();
        terminal
            .draw(|f| {
                draw(
                    f,
                    &mut app,
                    Chrome {
                        port: 4321,
                        clients: 2,
                    },
                )
            })
            .unwrap();
        let screen: String = terminal
            .backend()
            .buffer()
            .content()
            .chunks(60)
            .map(|row| row.iter().map(|c| c.symbol()).collect::<String>() + "\n")
            .collect();
        assert!(screen.contains("session (none)"), "{screen}");
        assert!(screen.contains("listening on port 4321"), "{screen}");
        assert!(screen.contains("clients: 2"), "{screen}");
        assert!(screen.contains("prompt"), "{screen}");
    }
}
