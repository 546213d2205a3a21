//! Finding regions inside a block: `p5:begin NAME` … `p5:end` comment pairs among the block's
//! children, and line ranges from the selection file (the statements of the outermost block
//! that lie wholly inside the range). The language engines turn a [`Region`] into text.

use crate::select::LineRegion;
use crate::sensor::Problem;
use crate::tree::{region_marker, text};
use tree_sitter::Node;

/// A region found in one block.
#[derive(Debug)]
pub struct Region<'t> {
    /// Display name.
    pub name: String,
    /// The `p5:begin` comment, if the region was marked by comments.
    pub begin: Option<Node<'t>>,
    /// The `p5:end` comment, if marked by comments.
    pub end: Option<Node<'t>>,
    /// The statements inside, in order.
    pub statements: Vec<Node<'t>>,
}

/// Regions among the children of `block`. `line_regions` are the selection's ranges for this
/// file, `used` marks those already placed (the outermost block wins).
pub fn in_block<'t>(
    block: Node<'t>,
    src: &str,
    is_comment: impl Fn(Node<'t>) -> bool,
    is_statement: impl Fn(Node<'t>) -> bool,
    line_regions: &[LineRegion],
    used: &mut [bool],
    problems: &mut Vec<Problem>,
) -> Vec<Region<'t>> {
    let mut out = Vec::new();
    let mut open: Option<Region<'t>> = None;
    let mut cursor = block.walk();
    let children: Vec<Node<'t>> = block.named_children(&mut cursor).collect();
    for &child in &children {
        if is_comment(child) {
            match region_marker(text(child, src)) {
                Some((true, name)) => {
                    if open.is_some() {
                        problems.push(Problem::at(child, "nested p5:begin ignored"));
                    } else {
                        open = Some(Region {
                            name,
                            begin: Some(child),
                            end: None,
                            statements: Vec::new(),
                        });
                    }
                }
                Some((false, _)) => match open.take() {
                    Some(mut r) => {
                        r.end = Some(child);
                        out.push(r);
                    }
                    None => problems.push(Problem::at(child, "p5:end without p5:begin ignored")),
                },
                None => {}
            }
        } else if let Some(r) = open.as_mut()
            && is_statement(child)
        {
            r.statements.push(child);
        }
    }
    if let Some(r) = open
        && let Some(b) = r.begin
    {
        problems.push(Problem::at(
            b,
            "p5:begin without p5:end in the same block ignored",
        ));
    }
    for (i, lr) in line_regions.iter().enumerate() {
        if used.get(i).copied().unwrap_or(true) {
            continue;
        }
        let (a, b) = (lr.lines[0] as usize, lr.lines[1] as usize);
        let statements: Vec<Node<'t>> = children
            .iter()
            .copied()
            .filter(|&c| {
                !is_comment(c)
                    && is_statement(c)
                    && c.start_position().row + 1 >= a
                    && c.end_position().row < b
            })
            .collect();
        if !statements.is_empty() {
            used[i] = true;
            out.push(Region {
                name: lr.name.clone(),
                begin: None,
                end: None,
                statements,
            });
        }
    }
    out
}
