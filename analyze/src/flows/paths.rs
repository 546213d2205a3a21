//! Call paths, interned: a path is its parent path plus one name, so a path's prefixes are
//! its ancestors (what root-cause prefix pruning walks) and two sessions analysed with one
//! [`PathTable`] give comparable path ids. The root of every path is its program, so
//! `main` of the client and `main` of the server are different paths; a path's length
//! counts its calls, not the program.

use crate::hash::FxHashMap;

/// Id of an interned path.
pub type PathId = u32;

/// No path (a program's parent).
pub const NO_PATH: PathId = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Node {
    parent: PathId,
    name: u32,
    len: u32,
}

/// Interned call paths and names.
#[derive(Debug, Clone, Default)]
pub struct PathTable {
    nodes: Vec<Node>,
    children: FxHashMap<(PathId, u32), PathId>,
    names: Vec<String>,
    name_ids: FxHashMap<String, u32>,
}

impl PathTable {
    /// Interns a name (function or program).
    pub fn name(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.name_ids.get(s) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(s.to_owned());
        self.name_ids.insert(s.to_owned(), id);
        id
    }

    /// The root of a program's paths.
    pub fn program(&mut self, program: &str) -> PathId {
        let name = self.name(program);
        self.child(NO_PATH, name)
    }

    /// `parent → name` (interned).
    pub fn child(&mut self, parent: PathId, name: u32) -> PathId {
        if let Some(&id) = self.children.get(&(parent, name)) {
            return id;
        }
        let id = self.nodes.len() as PathId;
        let len = if parent == NO_PATH {
            0
        } else {
            self.nodes[parent as usize].len + 1
        };
        self.nodes.push(Node { parent, name, len });
        self.children.insert((parent, name), id);
        id
    }

    /// The path `program: names[0] → names[1] → …` (interned).
    pub fn path(&mut self, program: &str, names: &[&str]) -> PathId {
        let mut p = self.program(program);
        for n in names {
            let n = self.name(n);
            p = self.child(p, n);
        }
        p
    }

    /// Parent path ([`NO_PATH`] for a program).
    pub fn parent(&self, p: PathId) -> PathId {
        self.nodes[p as usize].parent
    }

    /// Calls in the path (0 for a program root).
    pub fn len(&self, p: PathId) -> u32 {
        self.nodes[p as usize].len
    }

    /// Paths interned.
    pub fn count(&self) -> usize {
        self.nodes.len()
    }

    /// True when no path is interned.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The last name of a path.
    pub fn leaf(&self, p: PathId) -> &str {
        &self.names[self.nodes[p as usize].name as usize]
    }

    /// The program of a path.
    pub fn program_of(&self, mut p: PathId) -> &str {
        while self.parent(p) != NO_PATH {
            p = self.parent(p);
        }
        self.leaf(p)
    }

    /// The calls of a path, outermost first, joined by `→` (without the program).
    pub fn calls(&self, p: PathId) -> String {
        let mut names = Vec::new();
        let mut q = p;
        while q != NO_PATH && self.parent(q) != NO_PATH {
            names.push(self.leaf(q));
            q = self.parent(q);
        }
        names.reverse();
        names.join("→")
    }

    /// `program: main→A→B`.
    pub fn render(&self, p: PathId) -> String {
        format!("{}: {}", self.program_of(p), self.calls(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_interned_with_their_prefixes() {
        let mut t = PathTable::default();
        let ab = t.path("srv", &["main", "A", "B"]);
        let a = t.path("srv", &["main", "A"]);
        assert_eq!(t.parent(ab), a);
        assert_eq!(t.path("srv", &["main", "A", "B"]), ab);
        assert_ne!(t.path("cli", &["main", "A", "B"]), ab);
        assert_eq!(t.len(ab), 3);
        let srv = t.program("srv");
        assert_eq!(t.len(srv), 0);
        assert_eq!(t.render(ab), "srv: main→A→B");
        assert_eq!(t.calls(a), "main→A");
        assert_eq!(t.leaf(ab), "B");
        assert_eq!(t.program_of(ab), "srv");
    }
}
