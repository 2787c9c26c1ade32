//! syslog-ng's configuration language, read into a tree that remembers where every token was.
//!
//! Reading happens in three steps:
//! 1. [`source`] joins the main file and its `@include`s into one text, applies `@define`s and
//!    backtick substitution, and keeps a map from every line back to its file and line number.
//! 2. [`lexer`] cuts that text into tokens.
//! 3. [`tree`] parses tokens into [`Config`]: statements (`source s { … };`), driver and option
//!    nodes (`tcp(port(514))`), filter expressions and log paths.
//!
//! This crate knows the grammar, not what drivers do: checking that `port()` belongs to `tcp()`
//! is the job of whoever builds the driver, using the helpers in [`tree`] (`Node::options`,
//! [`ConfigError::unknown`]) so that every error has a position, a caret and suggestions.

pub mod declared;
mod error;
mod lexer;
mod secrets;
pub mod source;
mod subst;
pub mod text_file;
pub mod tree;

pub use error::{ConfigError, LoadError, Pos};
pub use secrets::without_secrets;
pub use source::SourceMap;
pub use tree::{Arg, Body, Condition, Config, Expr, IfArm, Node, Statement, Value, ValueKind};

use std::path::Path;

/// Reads and parses a configuration file with everything it includes.
pub fn load(path: &Path) -> Result<Config, Box<LoadError>> {
    let map = SourceMap::load(path)?;
    tree::parse(map)
}

/// Parses configuration text that did not come from a file (the embedded default, tests).
pub fn load_str(name: &str, text: &str) -> Result<Config, Box<LoadError>> {
    let map = SourceMap::from_text(name, text)?;
    tree::parse(map)
}

/// Normalizes an option or driver name: syslog-ng accepts `-` and `_` alike.
pub fn normalize(name: &str) -> String {
    name.replace('-', "_")
}
