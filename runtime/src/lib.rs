//! p5-runtime (placeholder, being written).
