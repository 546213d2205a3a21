//! Tree traversal without recursion (deeply nested input must not overflow the stack) and
//! small node helpers shared by the language engines.

use tree_sitter::Node;

/// Walks `root` in document order. `enter` returns whether to descend into the node's
/// children; `leave` runs after a node's subtree (also for nodes not descended into).
pub fn preorder<'t>(
    root: Node<'t>,
    mut enter: impl FnMut(Node<'t>) -> bool,
    mut leave: impl FnMut(Node<'t>),
) {
    let mut cursor = root.walk();
    'outer: loop {
        let node = cursor.node();
        if enter(node) && cursor.goto_first_child() {
            continue;
        }
        leave(node);
        loop {
            if cursor.goto_next_sibling() {
                continue 'outer;
            }
            if !cursor.goto_parent() {
                break 'outer;
            }
            leave(cursor.node());
        }
    }
}

/// The statements under `root` that leave the enclosing function (nodes of a kind in `jumps`,
/// e.g. `return_statement`), not descending into nested scopes (kinds in `scopes`: lambdas,
/// nested functions and classes), whose jumps leave only themselves. In document order.
pub fn jumps_out<'t>(root: Node<'t>, jumps: &[&str], scopes: &[&str]) -> Vec<Node<'t>> {
    let mut found = Vec::new();
    preorder(
        root,
        |n| {
            let kind = n.kind();
            if scopes.contains(&kind) {
                return false;
            }
            if jumps.contains(&kind) {
                found.push(n);
                return false;
            }
            true
        },
        |_| {},
    );
    found
}

/// The text of `node` (empty if the node's range is not valid UTF-8 boundaries).
pub fn text<'s>(node: Node<'_>, src: &'s str) -> &'s str {
    src.get(node.byte_range()).unwrap_or("")
}

/// The text of a region marker comment: `Some((true, name))` for `p5:begin NAME`,
/// `Some((false, ""))` for `p5:end`. Accepts `//`, `/* */` and `#` comments.
pub fn region_marker(comment: &str) -> Option<(bool, String)> {
    let c = comment.trim();
    let c = c
        .strip_prefix("//")
        .or_else(|| c.strip_prefix('#'))
        .or_else(|| {
            c.strip_prefix("/*")
                .map(|c| c.strip_suffix("*/").unwrap_or(c))
        })?
        .trim();
    if let Some(rest) = c.strip_prefix("p5:begin") {
        if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
            return None;
        }
        let name = rest.trim();
        Some((
            true,
            if name.is_empty() { "region" } else { name }.to_owned(),
        ))
    } else if c == "p5:end" || c.starts_with("p5:end ") {
        Some((false, String::new()))
    } else {
        None
    }
}

/// Collapses runs of whitespace to one space (names spread over lines).
pub fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_parse() {
        assert_eq!(
            region_marker("// p5:begin hot loop"),
            Some((true, "hot loop".into()))
        );
        assert_eq!(
            region_marker("/* p5:begin */"),
            Some((true, "region".into()))
        );
        assert_eq!(region_marker("# p5:end"), Some((false, String::new())));
        assert_eq!(region_marker("// p5:beginning"), None);
        assert_eq!(region_marker("// hello"), None);
    }
}
