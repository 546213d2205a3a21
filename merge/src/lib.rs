//! p5-merge (being written).
