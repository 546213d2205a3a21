//! The text of a pattern's call tree: `CLIENT>WS1(AUTH(DB),AP2(DB,DB))`, written and parsed.

use super::PatternNode;

/// A call tree: a node and its callees in call order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallTree {
    /// Node name.
    pub name: String,
    /// Callees, in call order.
    pub children: Vec<CallTree>,
}

pub(super) fn escape(name: &str, out: &mut String) {
    for c in name.chars() {
        if matches!(c, '\\' | '(' | ')' | ',' | '>') {
            out.push('\\');
        }
        out.push(c);
    }
}

fn write_tree(t: &CallTree, out: &mut String) {
    escape(&t.name, out);
    if !t.children.is_empty() {
        out.push('(');
        for (i, c) in t.children.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_tree(c, out);
        }
        out.push(')');
    }
}

/// The signature of a path: `root>callee(…)` (several top-level callees separated by `,`).
pub fn signature(root: &str, callees: &[CallTree]) -> String {
    let mut s = String::new();
    escape(root, &mut s);
    s.push('>');
    for (i, c) in callees.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        write_tree(c, &mut s);
    }
    s
}

/// The signature of a preorder node list (node 0 the root caller).
pub fn signature_of_nodes(nodes: &[PatternNode]) -> String {
    let Some(root) = nodes.first() else {
        return String::new();
    };
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate().skip(1) {
        if let Some(p) = n.parent.map(|p| p as usize).filter(|&p| p < i) {
            children[p].push(i);
        }
    }
    fn build(i: usize, nodes: &[PatternNode], children: &[Vec<usize>]) -> CallTree {
        CallTree {
            name: nodes[i].node.clone(),
            children: children[i]
                .iter()
                .map(|&c| build(c, nodes, children))
                .collect(),
        }
    }
    let callees: Vec<CallTree> = children[0]
        .iter()
        .map(|&c| build(c, nodes, &children))
        .collect();
    signature(&root.node, &callees)
}

/// Parses a signature into its root caller and callee trees.
pub fn parse_signature(sig: &str) -> Result<(String, Vec<CallTree>), String> {
    let chars: Vec<char> = sig.chars().collect();
    let mut pos = 0;
    let root = name(&chars, &mut pos);
    if chars.get(pos) != Some(&'>') {
        return Err(format!("signature {sig:?}: no '>' after the root caller"));
    }
    pos += 1;
    let mut callees = vec![tree(&chars, &mut pos, 0)?];
    while chars.get(pos) == Some(&',') {
        pos += 1;
        callees.push(tree(&chars, &mut pos, 0)?);
    }
    if pos != chars.len() {
        return Err(format!("signature {sig:?}: unexpected {:?}", chars[pos]));
    }
    Ok((root, callees))
}

fn name(chars: &[char], pos: &mut usize) -> String {
    let mut s = String::new();
    while let Some(&c) = chars.get(*pos) {
        match c {
            '\\' if *pos + 1 < chars.len() => {
                s.push(chars[*pos + 1]);
                *pos += 2;
            }
            '(' | ')' | ',' | '>' => break,
            _ => {
                s.push(c);
                *pos += 1;
            }
        }
    }
    s
}

fn tree(chars: &[char], pos: &mut usize, depth: usize) -> Result<CallTree, String> {
    if depth > 256 {
        return Err("signature nests too deeply".into());
    }
    let n = name(chars, pos);
    if n.is_empty() {
        return Err(format!("empty node name at {}", *pos));
    }
    let mut t = CallTree {
        name: n,
        children: Vec::new(),
    };
    if chars.get(*pos) == Some(&'(') {
        *pos += 1;
        loop {
            t.children.push(tree(chars, pos, depth + 1)?);
            match chars.get(*pos) {
                Some(',') => *pos += 1,
                Some(')') => {
                    *pos += 1;
                    break;
                }
                _ => return Err(format!("unclosed '(' at {}", *pos)),
            }
        }
    }
    Ok(t)
}
