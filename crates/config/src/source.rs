//! Joining a configuration and its `@include`s into one text, with `@define` and backtick
//! substitution applied, while remembering where each line came from.
//!
//! Pragmas are recognised at the start of a line, as syslog-ng does: `@version: 3.38`,
//! `@include "path"` (a file, a directory's files in name order, or a glob), `@define name
//! "value"`, and `@module`/`@requires`, which sluice accepts and ignores (it has no loadable
//! modules). A pragma line becomes an empty line in the joined text so that every other line
//! keeps its number. `` `name` `` anywhere else is replaced by the value of an `@define` seen
//! earlier, else of one of syslog-ng's built-in variables ([`builtin`]), else of the
//! environment variable of that name.
//!
//! `@include "scl.conf"` reads sluice's own configuration library (`scl.conf` beside this
//! file, built into sluice), not syslog-ng's: blocks under syslog-ng's names, built on
//! sluice's drivers.

use crate::error::{ConfigError, LoadError, Pos};
use crate::text_file;
use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// sluice's configuration library, read for `@include "scl.conf"`.
const LIBRARY: &str = include_str!("scl.conf");

/// The largest text the files, their includes and their substitutions join into: each
/// substitution may add [`crate::subst::GROWTH_LIMIT`], and many would add up without end.
const JOINED_LIMIT: usize = 64 << 20;

/// syslog-ng's own limit on nested includes.
const MAX_INCLUDE_DEPTH: usize = 15;

#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    files: Vec<String>,
    /// For every line of the joined text: the file index, its 1-based line number and its
    /// original text (before substitution), for error messages.
    lines: Vec<(u16, u32, String)>,
    /// The joined text the lexer reads.
    pub text: String,
    /// The `@version:` of the main file.
    pub version: Option<String>,
    defines: HashMap<String, String>,
    /// The directory of the main configuration file: `syslog-ng-sysconfdir`.
    sysconfdir: Option<PathBuf>,
}

impl SourceMap {
    /// Reads a file and its includes; on error, the map read so far comes back with the error
    /// so that its position can be shown.
    pub fn load(path: &Path) -> Result<SourceMap, Box<LoadError>> {
        let text = text_file::read_text(path, text_file::CONFIG_LIMIT).map_err(|e| {
            let err = ConfigError::general(format!(
                "cannot read configuration file {}: {e}",
                path.display()
            ));
            LoadError::new(err, SourceMap::default())
        })?;
        let mut map = SourceMap {
            sysconfdir: path.parent().map(Path::to_path_buf),
            ..SourceMap::default()
        };
        match map.add_file(path, &text, 0) {
            Ok(()) => Ok(map),
            Err(e) => Err(LoadError::new(e, map)),
        }
    }

    pub fn from_text(name: &str, text: &str) -> Result<SourceMap, Box<LoadError>> {
        let mut map = SourceMap::default();
        match map.add_file(Path::new(name), text, 0) {
            Ok(()) => Ok(map),
            Err(e) => Err(LoadError::new(e, map)),
        }
    }

    /// How many lines the map knows: the joined text's, then those of generated texts.
    pub fn line_count(&self) -> u32 {
        self.lines.len() as u32
    }

    /// Adds text that did not come from a file (a block as it was expanded) under `name`, so
    /// that positions in it can be shown; its lines follow all that the map holds.
    pub fn add_generated(&mut self, name: String, text: &str) {
        let file = self.files.len() as u16;
        self.files.push(name);
        for (i, line) in text.split('\n').enumerate() {
            self.lines.push((file, i as u32 + 1, line.to_string()));
        }
    }

    /// The file name, 1-based line number and original text of a joined line.
    pub fn origin(&self, line: u32) -> (&str, u32, &str) {
        match self.lines.get(line as usize) {
            Some((file, no, text)) => (&self.files[*file as usize], *no, text),
            None => ("<end of configuration>", line + 1, ""),
        }
    }

    fn add_file(&mut self, path: &Path, text: &str, depth: usize) -> Result<(), ConfigError> {
        let file = self.files.len() as u16;
        self.files.push(path.display().to_string());
        let mut scan = BlockScan::default();
        for (i, line) in text.lines().enumerate() {
            let here = self.lines.len() as u32;
            let line_no = i as u32 + 1;
            let trimmed = line.trim_start();
            let indent = (line.len() - trimmed.len()) as u32;
            let pos = |col: u32, len: usize| Pos {
                line: here,
                col: indent + col,
                len: len as u32,
            };
            self.lines.push((file, line_no, line.to_string()));
            if let Some(pragma) = trimmed.strip_prefix('@') {
                self.text.push('\n');
                let (word, rest) = pragma
                    .split_once(|c: char| c.is_whitespace() || c == ':')
                    .unwrap_or((pragma, ""));
                let arg = rest.trim_start_matches(':').trim();
                let arg = arg.split('#').next().unwrap_or("").trim();
                match word {
                    "version" => {
                        if depth == 0 {
                            self.version = Some(arg.to_string());
                        }
                    }
                    "define" => {
                        let (name, value) =
                            arg.split_once(char::is_whitespace).ok_or_else(|| {
                                ConfigError::new(
                                    pos(0, trimmed.len()),
                                    "@define needs a name and a value",
                                )
                            })?;
                        let value =
                            self.substitute(unquote(value.trim()), pos(0, trimmed.len()))?;
                        self.defines.insert(name.to_string(), value);
                    }
                    "include" => {
                        let target = self.substitute(unquote(arg), pos(0, trimmed.len()))?;
                        self.include(path, &target, depth, pos(9, arg.len()))?;
                    }
                    "module" | "requires" => {}
                    other => {
                        return Err(ConfigError::unknown(
                            pos(1, other.len()),
                            "pragma",
                            other,
                            "",
                            &["version", "include", "define", "module", "requires"],
                        ))
                    }
                }
                continue;
            }
            for (part, in_block_body) in scan.split(line) {
                if in_block_body {
                    self.text.push_str(&line[part]);
                } else {
                    let at = Pos {
                        line: here,
                        col: part.start as u32,
                        len: 1,
                    };
                    let substituted = self.substitute(&line[part], at)?;
                    self.text.push_str(&substituted);
                }
            }
            self.text.push('\n');
            if self.text.len() > JOINED_LIMIT {
                return Err(ConfigError::new(
                    pos(0, trimmed.len()),
                    format!(
                        "the configuration with its includes and substitutions is over {} MiB \
                         here",
                        JOINED_LIMIT >> 20
                    ),
                ));
            }
        }
        Ok(())
    }

    fn include(
        &mut self,
        from: &Path,
        target: &str,
        depth: usize,
        pos: Pos,
    ) -> Result<(), ConfigError> {
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(ConfigError::new(
                pos,
                format!("@include nested more than {MAX_INCLUDE_DEPTH} deep"),
            ));
        }
        if target == "scl.conf" {
            return self.add_file(Path::new("scl.conf (sluice's library)"), LIBRARY, depth + 1);
        }
        if let Some((name, text)) = library_file(target) {
            return self.add_file(Path::new(name), &text, depth + 1);
        }
        let base = from.parent().unwrap_or(Path::new("."));
        let candidate = if Path::new(target).is_absolute() {
            PathBuf::from(target)
        } else {
            base.join(target)
        };
        let mut files: Vec<PathBuf> = if candidate.is_dir() {
            std::fs::read_dir(&candidate)
                .map_err(|e| {
                    ConfigError::new(
                        pos,
                        format!("cannot read directory {}: {e}", candidate.display()),
                    )
                })?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| {
                    let name = p
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    p.is_file() && !name.starts_with('.') && !name.ends_with('~')
                })
                .collect()
        } else if target.contains(['*', '?', '[']) {
            glob::glob(&candidate.to_string_lossy())
                .map_err(|e| ConfigError::new(pos, format!("bad @include pattern: {e}")))?
                .filter_map(Result::ok)
                .filter(|p| p.is_file())
                .collect()
        } else if candidate.exists() {
            vec![candidate]
        } else {
            return Err(ConfigError::new(
                pos,
                format!("included file {} does not exist", candidate.display()),
            ));
        };
        files.sort();
        for file in files {
            let text = text_file::read_text(&file, text_file::CONFIG_LIMIT).map_err(|e| {
                ConfigError::new(
                    pos,
                    format!("cannot read included file {}: {e}", file.display()),
                )
            })?;
            self.add_file(&file, &text, depth + 1)?;
        }
        Ok(())
    }

    /// The value of an `@define`, else of a built-in variable, else of the environment
    /// variable of that name.
    pub fn global(&self, name: &str) -> Option<String> {
        self.defines
            .get(name)
            .cloned()
            .or_else(|| builtin(name, self.sysconfdir.as_deref()))
            .or_else(|| std::env::var(name).ok())
    }

    /// Replaces `` `name` `` in text read from a file, which starts `at`, with its `@define`
    /// or environment value.
    fn substitute(&self, text: &str, at: Pos) -> Result<String, ConfigError> {
        crate::subst::substitute(text, |name| self.global(name)).map_err(|e| {
            ConfigError::new(
                Pos {
                    line: at.line,
                    col: at.col + e.offset() as u32,
                    len: e.len() as u32,
                },
                e.message("neither an @define nor an environment variable"),
            )
        })
    }
}

/// The files of syslog-ng's library that configurations include one by one, as sluice
/// gives them: `system/tty10.conf` (under `scl-root`, or `scl/` of the include path), which
/// Debian's and Ubuntu's syslog-ng packages shipped before 3.38 and their stock
/// configurations include, defines `tty10` as the host's tenth virtual console.
fn library_file(target: &str) -> Option<(&'static str, String)> {
    let scl_root = builtin("scl-root", None)?;
    let in_library = target
        .strip_prefix(scl_root.as_str())
        .and_then(|t| t.strip_prefix('/'))
        .or_else(|| target.strip_prefix("scl/"))?;
    match in_library {
        "system/tty10.conf" => Some((
            "scl/system/tty10.conf (sluice's library)",
            format!("@define tty10 \"{}\"\n", builtin("virtual-console", None)?),
        )),
        _ => None,
    }
}

/// syslog-ng's built-in variables, for configurations that name them, with sluice's
/// values: `syslog-ng-sysconfdir` is the main configuration file's directory; the data and
/// module directories are sluice's (it reads no syslog-ng modules or library files).
/// `virtual-console` is the host's tenth virtual console, for the library's
/// `getvirtconsole()`.
pub fn builtin(name: &str, sysconfdir: Option<&Path>) -> Option<String> {
    let value = match name.replace('_', "-").as_str() {
        "syslog-ng-sysconfdir" => {
            return Some(
                sysconfdir
                    .unwrap_or(Path::new("/etc/sluice"))
                    .display()
                    .to_string(),
            )
        }
        "syslog-ng-prefix" => "/usr",
        "syslog-ng-data" => "/usr/share/sluice",
        "syslog-ng-include" => "/usr/share/sluice/include",
        "include-path" => "/etc/sluice:/usr/share/sluice/include",
        "scl-root" => "/usr/share/sluice/include/scl",
        "module-path" | "module-install-dir" => "/usr/lib/sluice",
        "virtual-console" => {
            use std::os::unix::fs::FileTypeExt;
            let console = ["/dev/tty10", "/dev/ttyva"]
                .into_iter()
                .find(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_char_device()));
            console.unwrap_or("/dev/null")
        }
        _ => return None,
    };
    Some(value.to_string())
}

/// Follows the text line by line to tell which parts are the body of a `block` definition:
/// their backticks name the block's arguments and are replaced where the block is used.
/// (syslog-ng substitutes what is on the line of the block's opening brace when it reads the
/// file, so that a one-line block loses its arguments; sluice leaves the whole body alone.)
#[derive(Default)]
struct BlockScan {
    /// Braces open outside strings and comments.
    depth: u32,
    /// The depth at which the body of the block being read opened.
    body: Option<u32>,
    /// `block` was read at the top level and its body's brace is still to come.
    header: bool,
    quote: Option<char>,
    escaped: bool,
    comment: bool,
    word: String,
}

impl BlockScan {
    /// Cuts a line into parts outside and inside block bodies (`true`), in order.
    fn split(&mut self, line: &str) -> Vec<(Range<usize>, bool)> {
        let mut parts = Vec::new();
        let mut start = 0;
        for (i, c) in line.char_indices() {
            let was_in_body = self.body.is_some();
            self.feed(c);
            let cut = match (was_in_body, self.body.is_some()) {
                (false, true) => i + 1,
                (true, false) => i,
                _ => continue,
            };
            parts.push((start..cut, was_in_body));
            start = cut;
        }
        parts.push((start..line.len(), self.body.is_some()));
        self.feed('\n');
        parts
    }

    fn feed(&mut self, c: char) {
        if self.comment {
            self.comment = c != '\n';
            return;
        }
        if let Some(q) = self.quote {
            match c {
                '\\' if q == '"' && !self.escaped => self.escaped = true,
                c if c == q && !self.escaped => self.quote = None,
                _ => self.escaped = false,
            }
            return;
        }
        if c.is_whitespace() || "{}();,#\"'".contains(c) {
            self.end_word();
        } else {
            self.word.push(c);
        }
        match c {
            '#' => self.comment = true,
            '"' | '\'' => {
                self.quote = Some(c);
                self.escaped = false;
            }
            '{' => {
                if self.header {
                    self.header = false;
                    self.body = Some(self.depth);
                }
                self.depth += 1;
            }
            '}' => {
                self.depth = self.depth.saturating_sub(1);
                if self.body == Some(self.depth) {
                    self.body = None;
                }
            }
            _ => {}
        }
    }

    fn end_word(&mut self) {
        if self.word == "block" && self.depth == 0 && self.body.is_none() {
            self.header = true;
        }
        self.word.clear();
    }
}

/// The text between matching quotes, or the text itself.
fn unquote(s: &str) -> &str {
    let s = s.trim().trim_end_matches(';').trim();
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return &s[1..s.len() - 1];
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defines_and_backticks() {
        let map = SourceMap::from_text(
            "t.conf",
            "@version: 3.38\n@define port \"5514\"\nsource s { tcp(port(`port`)); };\n",
        )
        .unwrap();
        assert_eq!(map.version.as_deref(), Some("3.38"));
        assert_eq!(map.text, "\n\nsource s { tcp(port(5514)); };\n");
        assert_eq!(
            map.origin(2),
            ("t.conf", 3, "source s { tcp(port(`port`)); };")
        );
    }

    #[test]
    fn undefined_backtick_is_an_error_with_its_position() {
        let failed =
            SourceMap::from_text("t.conf", "a `nope` b # `fine` in a comment\n").unwrap_err();
        let (err, map) = (failed.error, failed.map);
        assert_eq!(map.origin(0).1, 1);
        let map = SourceMap::from_text("t.conf", "a \"#\" `HOME` # `x`\n").unwrap();
        assert!(!map.text.contains("`HOME`") && map.text.contains("# `x`"));
        assert_eq!(
            err.pos,
            Some(Pos {
                line: 0,
                col: 2,
                len: 6
            })
        );
    }

    #[test]
    fn includes_files_directories_and_globs() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("conf.d")).unwrap();
        std::fs::write(dir.path().join("conf.d/b.conf"), "b;\n").unwrap();
        std::fs::write(dir.path().join("conf.d/a.conf"), "a;\n").unwrap();
        std::fs::write(dir.path().join("conf.d/.hidden"), "hidden;\n").unwrap();
        std::fs::write(dir.path().join("one.inc"), "one;\n").unwrap();
        let main = dir.path().join("main.conf");
        std::fs::write(
            &main,
            "@include \"one.inc\"\n@include \"conf.d\"\n@include \"conf.d/*.conf\"\nend;\n",
        )
        .unwrap();
        let map = SourceMap::load(&main).unwrap();
        let words: Vec<&str> = map.text.split_whitespace().collect();
        assert_eq!(words, ["one;", "a;", "b;", "a;", "b;", "end;"]);
        let last = map.text.lines().count() as u32 - 1;
        assert_eq!(map.origin(last).1, 4);
    }

    #[test]
    fn what_cannot_be_read_says_what_and_where() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo.conf");
        let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let main = dir.path().join("main.conf");
        std::fs::write(&main, "a;\n@include \"fifo.conf\"\n").unwrap();
        let e = SourceMap::load(&main).unwrap_err();
        assert!(
            e.error
                .message
                .contains("fifo.conf: a FIFO, not a regular file"),
            "{}",
            e.error.message
        );
        std::fs::write(&main, b"a;\nb\xff;\n").unwrap();
        let e = SourceMap::load(&main).unwrap_err();
        assert!(
            e.error.message.contains("not UTF-8 at line 2, column 2"),
            "{}",
            e.error.message
        );
        let value = "x".repeat(1000);
        let line = format!("{}\n", "`big`".repeat(1000));
        let text = format!("@define big \"{value}\"\n{}", line.repeat(100));
        let e = SourceMap::from_text("t.conf", &text).unwrap_err();
        assert!(
            e.error.message.contains("over 64 MiB"),
            "{}",
            e.error.message
        );
    }

    #[test]
    fn scl_conf_is_sluices_library_and_builtins_are_defined() {
        let dir = tempfile::tempdir().unwrap();
        // A syslog-ng scl.conf beside the file is not read.
        std::fs::write(dir.path().join("scl.conf"), "@module confgen\nnot read;\n").unwrap();
        let main = dir.path().join("main.conf");
        std::fs::write(
            &main,
            "@include \"scl.conf\"\n@define d \"`syslog-ng-sysconfdir`/x\"\nend(\"`d`\");\n",
        )
        .unwrap();
        let map = SourceMap::load(&main).unwrap();
        assert!(map.text.contains("block destination getvirtconsole()"));
        assert!(!map.text.contains("not read"));
        let want = format!("end(\"{}/x\");", dir.path().display());
        assert!(map.text.contains(&want), "{}", map.text);
    }

    /// The stock configurations of Debian's and Ubuntu's older syslog-ng packages include
    /// `system/tty10.conf` from the library and write to `` `tty10` ``.
    #[test]
    fn the_librarys_tty10_conf_defines_the_virtual_console() {
        for include in ["`scl-root`/system/tty10.conf", "scl/system/tty10.conf"] {
            let text = format!("@include \"{include}\"\nd {{ file(`tty10`); }};\n");
            let map = SourceMap::from_text("/nonexistent/x.conf", &text).unwrap();
            let console = builtin("virtual-console", None).unwrap();
            assert!(
                map.text.contains(&format!("file({console});")),
                "{include}: {}",
                map.text
            );
        }
    }

    #[test]
    fn missing_include_is_an_error() {
        let err = SourceMap::from_text("/nonexistent/x.conf", "@include \"missing.conf\"\n")
            .unwrap_err()
            .error;
        assert!(err.message.contains("does not exist"), "{}", err.message);
    }
}
