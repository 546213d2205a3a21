//! `--comm` for Rust: std's sockets become the recording ones of `p5_runtime::net::compat`,
//! which has std's API (see that module).
//!
//! Types, crate-wide (every file, selected or not, so values keep one type across files):
//! imports from `std::net` are redirected (`use std::net::{TcpListener, IpAddr}` →
//! `use p5_runtime::net::compat::{TcpListener, IpAddr}`, `use std::net;` →
//! `use p5_runtime::net::compat as net;`, `use std::{io, net::TcpStream}` →
//! `use {std::io, p5_runtime::net::compat::TcpStream}`) and so are the paths
//! `std::net::{TcpStream, TcpListener, UdpSocket, Incoming}` in code and in macro arguments.
//! Imports that name no socket type (`use std::net::IpAddr`) stay as they are.
//!
//! Sensors, in selected functions: each constructor call `TcpStream::connect(a)`,
//! `TcpStream::connect_timeout(a, t)`, `TcpListener::bind(a)`, `UdpSocket::bind(a)` becomes its
//! `p5_` twin with the sensor id first (`TcpStream::p5_connect(0x…, a)`); the socket records
//! everything it does under that id. Constructors named through a name the file also imports
//! from elsewhere, used as function values (`.and_then(TcpStream::connect)`) or written
//! inside macro arguments keep std's signature and record under sensor 0.
//!
//! Interop: another crate's `X::from_std(s)` gets `(s).into()` (see `interop` in `rust.rs`).

use crate::sensor::{Kind, Span, parse_literal};
use crate::tree::{preorder, text};
use crate::unit::Unit;
use std::collections::{HashMap, HashSet};
use tree_sitter::Node;

const COMPAT: &str = "p5_runtime::net::compat";
const TYPES: [&str; 3] = ["TcpStream", "TcpListener", "UdpSocket"];
/// The constructors that get a sensor: (type, method).
const CONSTRUCTORS: [(&str, &str); 4] = [
    ("TcpStream", "connect"),
    ("TcpStream", "connect_timeout"),
    ("TcpListener", "bind"),
    ("UdpSocket", "bind"),
];

fn flat(n: Node<'_>, src: &str) -> String {
    text(n, src).split_whitespace().collect()
}

fn one_line(n: Node<'_>) -> bool {
    n.start_position().row == n.end_position().row
}

fn socket_type(name: &str) -> Option<&'static str> {
    TYPES.into_iter().find(|t| *t == name)
}

/// How the file names the socket types.
#[derive(Debug, Default)]
pub struct Net {
    /// Imported names (aliases included) → socket type.
    names: HashMap<String, &'static str>,
    /// Names of the `std::net` module itself (`use std::net;`).
    modules: HashSet<String>,
    /// Socket type names also imported from elsewhere.
    ambiguous: HashSet<String>,
    /// The redirections, made into edits by `apply` after the engine's own (so a call
    /// wrapped by `--calls` opens before its redirected path).
    pending: Vec<Pending>,
}

/// A planned edit: insert at `.0`, or replace `.0..end`.
#[derive(Debug)]
struct Pending(usize, Option<usize>, String);

impl Pending {
    fn replace(n: Node<'_>, text: impl Into<String>) -> Pending {
        Pending(n.start_byte(), Some(n.end_byte()), text.into())
    }
}

/// A use-tree node naming the net module: `std::net`, `net` inside `std::{…}`, or the
/// already redirected `p5_runtime::net::compat`.
#[derive(Clone, Copy, PartialEq)]
enum Module {
    Std,
    InStdList,
    Compat,
}

impl Net {
    /// Plans the redirection of the file's `std::net` imports and socket type paths and
    /// learns how it names the socket types.
    pub fn scan(u: &Unit<'_>, root: Node<'_>) -> Net {
        let mut net = Net::default();
        let uses_sockets = TYPES.iter().any(|t| u.src.contains(t));
        preorder(
            root,
            |n| match n.kind() {
                "use_declaration" => {
                    net.use_declaration(u, n, uses_sockets);
                    false
                }
                "scoped_identifier" | "scoped_type_identifier" => {
                    net.pending.extend(type_path(u.src, n));
                    true
                }
                "identifier" => {
                    if n.parent().is_some_and(|p| p.kind() == "token_tree") {
                        net.pending.extend(token_path(u.src, n));
                    }
                    false
                }
                _ => !n.is_missing(),
            },
            |_| {},
        );
        net
    }

    /// Makes the planned redirections into edits.
    pub fn apply(&mut self, u: &mut Unit<'_>) {
        for Pending(at, end, text) in self.pending.drain(..) {
            match end {
                Some(end) => u.edits.replace(at, end, text),
                None => u.edits.open(at, text),
            }
        }
    }

    fn use_declaration(&mut self, u: &Unit<'_>, decl: Node<'_>, uses_sockets: bool) {
        let src = u.src;
        let Some(arg) = decl.child_by_field_name("argument") else {
            return;
        };
        let mut found = Vec::new();
        modules(arg, src, &mut found);
        if found.is_empty() {
            preorder(
                decl,
                |n| {
                    if n.kind() == "identifier" && socket_type(text(n, src)).is_some() {
                        self.ambiguous.insert(text(n, src).to_owned());
                    }
                    true
                },
                |_| {},
            );
            return;
        }
        let mut redirect = Vec::new();
        for (m, kind) in found {
            if self.learn(m, src) && kind != Module::Compat && uses_sockets && one_line(m) {
                redirect.push((m, kind));
            }
        }
        if redirect.iter().any(|(_, k)| *k == Module::InStdList) {
            // `use std::{io, net::TcpStream}` → `use {std::io, p5_runtime::net::compat::TcpStream}`
            let (Some(path), Some(list)) = (
                arg.child_by_field_name("path"),
                arg.child_by_field_name("list"),
            ) else {
                return;
            };
            if path.start_position().row != list.start_position().row {
                return;
            }
            self.pending.push(Pending(
                path.start_byte(),
                Some(list.start_byte()),
                String::new(),
            ));
            let mut c = list.walk();
            for item in list.named_children(&mut c) {
                if item.kind().ends_with("comment")
                    || redirect.iter().any(|(m, _)| first_segment(item) == *m)
                {
                    continue;
                }
                match item.kind() {
                    "self" => self.pending.push(Pending::replace(item, "std")),
                    "use_as_clause"
                        if item
                            .child_by_field_name("path")
                            .is_some_and(|p| p.kind() == "self") =>
                    {
                        let s = item.child_by_field_name("path").unwrap_or(item);
                        self.pending.push(Pending::replace(s, "std"));
                    }
                    _ => self
                        .pending
                        .push(Pending(item.start_byte(), None, "std::".into())),
                }
            }
        }
        for (m, _) in redirect {
            redirect_module(&mut self.pending, m);
        }
    }

    /// Records what the use tree at net module node `m` imports; true if that is a socket type,
    /// the module itself or a glob.
    fn learn(&mut self, m: Node<'_>, src: &str) -> bool {
        let Some(p) = m.parent() else {
            return false;
        };
        let alias = |n: Node<'_>| {
            n.parent()
                .filter(|a| a.kind() == "use_as_clause")
                .and_then(|a| a.child_by_field_name("alias"))
                .map(|a| text(a, src).to_owned())
        };
        match p.kind() {
            "use_declaration" | "use_list" => {
                self.modules.insert("net".into());
                true
            }
            "use_as_clause" => {
                self.modules.extend(alias(m));
                true
            }
            "use_wildcard" => {
                for t in TYPES {
                    self.names.insert(t.into(), t);
                }
                true
            }
            "scoped_identifier" => {
                let name = p.child_by_field_name("name").map_or("", |n| text(n, src));
                let Some(ty) = socket_type(name) else {
                    return name == "Incoming";
                };
                self.names.insert(alias(p).unwrap_or_else(|| ty.into()), ty);
                true
            }
            "scoped_use_list" => {
                let Some(list) = p.child_by_field_name("list") else {
                    return false;
                };
                let mut any = false;
                let mut c = list.walk();
                for item in list.named_children(&mut c) {
                    let (path, alias) = match item.kind() {
                        "use_as_clause" => (
                            item.child_by_field_name("path"),
                            item.child_by_field_name("alias").map(|a| text(a, src)),
                        ),
                        _ => (Some(item), None),
                    };
                    let Some(path) = path else { continue };
                    if path.kind() == "self" {
                        self.modules.insert(alias.unwrap_or("net").to_owned());
                        any = true;
                    } else if path.kind() == "identifier"
                        && let Some(ty) = socket_type(text(path, src))
                    {
                        self.names.insert(alias.unwrap_or(ty).to_owned(), ty);
                        any = true;
                    }
                }
                any
            }
            _ => false,
        }
    }

    /// A constructor call in a selected function: `T::connect(a)` → `T::p5_connect(0x…, a)`;
    /// one already rewritten keeps its id.
    pub fn call(&self, u: &mut Unit<'_>, call: Node<'_>, function: &str) {
        let src = u.src;
        let (Some(f), Some(args)) = (
            call.child_by_field_name("function"),
            call.child_by_field_name("arguments"),
        ) else {
            return;
        };
        let (Some(path), Some(name)) =
            (f.child_by_field_name("path"), f.child_by_field_name("name"))
        else {
            return;
        };
        if f.kind() != "scoped_identifier" {
            return;
        }
        let method = text(name, src);
        if let Some(std_name) = method.strip_prefix("p5_") {
            let existing = args
                .named_child(0)
                .and_then(|a| parse_literal(text(a, src)));
            if existing.is_some() && CONSTRUCTORS.iter().any(|c| c.1 == std_name) {
                u.ledger
                    .add(Kind::Comm, function, std_name, Span::of(call), existing);
            }
            return;
        }
        let Some(ty) = self.resolve(&flat(path, src)) else {
            return;
        };
        if !CONSTRUCTORS.contains(&(ty, method)) {
            return;
        }
        let id = u
            .ledger
            .add(Kind::Comm, function, method, Span::of(call), None);
        let lit = u.lit(id);
        u.edits
            .replace(name.start_byte(), name.end_byte(), format!("p5_{method}"));
        u.edits.open(args.start_byte() + 1, format!("{lit}, "));
    }

    /// The socket type a path names, if it does.
    fn resolve(&self, path: &str) -> Option<&'static str> {
        let path = path.trim_start_matches("::");
        let ty = if let Some(rest) = path
            .strip_prefix("std::net::")
            .or_else(|| path.strip_prefix("p5_runtime::net::compat::"))
        {
            rest
        } else if let Some((m, rest)) = path.split_once("::") {
            if !self.modules.contains(m) {
                return None;
            }
            rest
        } else {
            if self.ambiguous.contains(path) {
                return None;
            }
            return self.names.get(path).copied();
        };
        socket_type(ty)
    }
}

/// The net module nodes of a use tree.
fn modules<'t>(n: Node<'t>, src: &str, out: &mut Vec<(Node<'t>, Module)>) {
    match n.kind() {
        "scoped_identifier" => match flat(n, src).trim_start_matches("::") {
            "std::net" => out.push((n, Module::Std)),
            "p5_runtime::net::compat" => out.push((n, Module::Compat)),
            _ => {
                if let Some(p) = n.child_by_field_name("path") {
                    modules(p, src, out);
                }
            }
        },
        "scoped_use_list" => {
            let Some(path) = n.child_by_field_name("path") else {
                if let Some(l) = n.child_by_field_name("list") {
                    modules(l, src, out);
                }
                return;
            };
            if matches!(flat(path, src).as_str(), "std" | "::std") {
                let Some(list) = n.child_by_field_name("list") else {
                    return;
                };
                let mut c = list.walk();
                for item in list.named_children(&mut c) {
                    let first = first_segment(item);
                    if first.kind() == "identifier" && text(first, src) == "net" && first != item
                        || item.kind() == "identifier" && text(item, src) == "net"
                    {
                        out.push((first, Module::InStdList));
                    }
                }
            } else {
                modules(path, src, out);
            }
        }
        "use_list" => {
            let mut c = n.walk();
            for item in n.named_children(&mut c) {
                modules(item, src, out);
            }
        }
        "use_as_clause" => {
            if let Some(p) = n.child_by_field_name("path") {
                modules(p, src, out);
            }
        }
        "use_wildcard" => {
            if let Some(p) = n.named_child(0) {
                modules(p, src, out);
            }
        }
        _ => {}
    }
}

/// The first path segment of a use tree (`net` of `net::{…}`).
fn first_segment(n: Node<'_>) -> Node<'_> {
    let mut cur = n;
    loop {
        let next = match cur.kind() {
            "scoped_identifier" | "scoped_use_list" | "use_as_clause" => {
                cur.child_by_field_name("path")
            }
            "use_wildcard" => cur.named_child(0),
            _ => None,
        };
        match next {
            Some(x) => cur = x,
            None => return cur,
        }
    }
}

/// `std::net` (or `net` in a std list) → `p5_runtime::net::compat`; a module import keeps
/// its name `net`, and so does `self` in a list.
fn redirect_module(out: &mut Vec<Pending>, m: Node<'_>) {
    let Some(p) = m.parent() else {
        return;
    };
    let module_import = matches!(p.kind(), "use_declaration" | "use_list");
    let to = if module_import {
        format!("{COMPAT} as net")
    } else {
        COMPAT.to_owned()
    };
    out.push(Pending::replace(m, to));
    if p.kind() == "scoped_use_list"
        && let Some(list) = p.child_by_field_name("list")
    {
        let mut c = list.walk();
        for item in list.named_children(&mut c) {
            if item.kind() == "self" {
                out.push(Pending::replace(item, "self as net"));
            }
        }
    }
}

/// `std::net::TcpStream` in a type or expression → `p5_runtime::net::compat::TcpStream`.
fn type_path(src: &str, n: Node<'_>) -> Option<Pending> {
    let (path, name) = (
        n.child_by_field_name("path")?,
        n.child_by_field_name("name")?,
    );
    let name = text(name, src);
    if (socket_type(name).is_some() || name == "Incoming")
        && matches!(flat(path, src).as_str(), "std::net" | "::std::net")
        && one_line(path)
    {
        return Some(Pending::replace(path, COMPAT));
    }
    None
}

/// `std::net::TcpStream` in a macro's token tree, where tree-sitter sees only tokens.
fn token_path(src: &str, std: Node<'_>) -> Option<Pending> {
    if text(std, src) != "std" || std.prev_sibling().is_some_and(|p| text(p, src) == "::") {
        return None;
    }
    let mut toks = Vec::new();
    let mut cur = std;
    for _ in 0..4 {
        cur = cur.next_sibling()?;
        toks.push(text(cur, src));
    }
    if toks[..3] == ["::", "net", "::"]
        && socket_type(toks[3]).is_some()
        && std.start_position().row == cur.start_position().row
    {
        let net = std.next_sibling()?.next_sibling()?;
        return Some(Pending(
            std.start_byte(),
            Some(net.end_byte()),
            COMPAT.into(),
        ));
    }
    None
}
