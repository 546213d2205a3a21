//! Text trace reading speed (budget: ≥ 2 M lines/s). Prints lines/s.
fn main() {}
